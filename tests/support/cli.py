"""Running the real ``baton`` command in a subprocess, as a person would, for the CLI tests; the routes.yaml
and the shell pane a first-day test starts from."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.paths import REPO
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

__all__ = [
    "BATON", "Result", "baton_env", "baton", "baton_read_by_head", "json_lines", "shell_ready", "start_baton",
    "write_routes",
]

_SCRIPT = Path(sys.executable).with_name("baton")
#: the installed console script when there is one (what a person runs), else the module
BATON = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "pipeline.cli"]


@dataclass(frozen=True)
class Result:
    status: int
    out: str
    err: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]

    def one_line_error(self, status: int, *needles: str) -> str:
        """Assert: this exit status, exactly one line on standard error holding every needle, no traceback."""
        assert self.status == status, (self.status, self.out, self.err)
        assert "Traceback" not in self.err, self.err
        assert len(self.error_lines) == 1, self.err
        for needle in needles:
            assert needle in self.err, (needle, self.err)
        return self.error_lines[0]


def json_lines(text: str) -> list[Any]:
    """``--json`` output of a streaming command (``history``): one JSON object per line, each parsed."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def baton_env(env: dict[str, str] | None) -> dict[str, str]:
    merged = dict(os.environ)
    merged.pop("TMUX", None)  # tests name their server; a developer's own tmux must not leak in
    for size in ("COLUMNS", "LINES"):  # the runner's terminal is not the command's (pytest-xdist sets them)
        merged.pop(size, None)
    merged["PYTHONPATH"] = str(REPO) + os.pathsep + merged.get("PYTHONPATH", "")
    merged.update(env or {})
    return merged


def baton(*args: str, cwd: str | Path | None = None, input: bytes | str | None = None,
          env: dict[str, str] | None = None, timeout: float = 60) -> Result:
    data = input.encode() if isinstance(input, str) else input
    done = subprocess.run([*BATON, *args], cwd=cwd, input=data, capture_output=True, env=baton_env(env),
                          timeout=timeout, stdin=None if data is not None else subprocess.DEVNULL)
    return Result(
        done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
    )


def start_baton(*args: str, stderr: Path, cwd: str | Path | None = None,
                env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A long-running ``baton`` (``run``) writing its standard error to ``stderr``."""
    with stderr.open("wb") as err:
        return subprocess.Popen([*BATON, *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, env=baton_env(env))


@contextlib.contextmanager
def following_history(*args: str, into: Path) -> Iterator[Callable[[], list[Any]]]:
    """``baton history -f --json ARGS`` writing into ``into`` for the block, which gets a reader of the
    lines it printed so far; ended by Ctrl-C (SIGINT) as a person ends it."""
    with into.open("wb") as out:
        follow = subprocess.Popen([*BATON, "history", "-f", "--json", *args], stdout=out,
                                  stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=baton_env(None))
    try:
        yield lambda: json_lines(into.read_text())
    finally:
        follow.send_signal(signal.SIGINT)
        follow.wait(timeout=20)


def baton_read_by_head(*args: str, lines: int, timeout: float = 30,
                       preexec_fn: Callable[[], None] | None = None) -> tuple[int, list[bytes], bytes]:
    """``baton ARGS | head -LINES``: ``lines`` lines read, then standard output closed as head does after
    them. Returns the exit status, the lines read and standard error; killed if it has not exited within
    ``timeout``."""
    proc = subprocess.Popen([*BATON, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=baton_env(None), preexec_fn=preexec_fn)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        read = [proc.stdout.readline() for _ in range(lines)]
        proc.stdout.close()
        return proc.wait(timeout=timeout), read, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def write_routes(path: Path, socket: str, tiles: dict, routes: list | None = None) -> Path:
    config = path / "routes.yaml"
    config.write_text(json.dumps({"version": 1, "tmux": {"socket_name": socket}, "tiles": tiles,
                                  "routes": routes or []}))
    return config


def shell_ready(tmux_server: TmuxServer) -> str:
    pane = tmux_server.new_pane()
    wait_for(lambda: "$" in tmux_server.capture(pane), what="the shell's prompt")
    return pane
