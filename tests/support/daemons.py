"""``baton run`` as a subprocess — started, killed with SIGKILL, restarted — and the routes.yaml it reads."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pipeline.engine.journal import Journal, default_journal_path
from tests.support.polling import wait_for

__all__ = ["Daemon", "daemon_factory", "has_started", "wait_followed", "write_config"]

#: ``baton run``'s start-up line (a tile's line before it may say "no tmux server is running: …")
_STARTED = re.compile(r"^\S+ running: ", re.M)


def has_started(stderr: str) -> bool:
    """Whether ``baton run``'s standard error holds its start-up line."""
    return _STARTED.search(stderr) is not None


class Daemon:
    """`baton run` as a subprocess, restartable, its stderr kept per start."""

    def __init__(self, config: Path, tmp: Path) -> None:
        self.config, self.tmp, self.starts, self.kills = config, tmp, 0, 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.verbose = ["-v"] if os.environ.get("BATON_TEST_VERBOSE") else []
        #: set in the next start's environment on top of the test's own
        self.env: dict[str, str] = {}

    def start(self) -> None:
        self.starts += 1
        self.err = self.tmp / f"daemon-{self.starts}.err"
        with self.err.open("w") as errs:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pipeline.cli", *self.verbose, "run", "-c", str(self.config)],
                stdout=subprocess.DEVNULL,
                stderr=errs,
                env={**os.environ, **self.env},
            )

    def wait_running(self) -> None:
        assert self.proc is not None
        proc = self.proc
        wait_for(lambda: has_started(self.err.read_text()) or proc.poll() is not None, what="baton run")
        assert proc.poll() is None, self.err.read_text()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.kills += 1

    def stop(self) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise
        return self.proc.returncode if self.proc else 0

    def stderr(self) -> str:
        return "".join((self.tmp / f"daemon-{i}.err").read_text() for i in range(1, self.starts + 1))


@pytest.fixture
def daemon_factory(tmp_path: Path) -> Iterator[Callable[[Path], Daemon]]:
    """`baton run` subprocesses (:class:`Daemon`), made per config; any still running is killed at the end."""
    daemons: list[Daemon] = []

    def make(config: Path) -> Daemon:
        d = Daemon(config, tmp_path)
        daemons.append(d)
        return d

    yield make
    for d in daemons:
        if d.proc and d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()


def wait_followed(daemon: Daemon, tile: str) -> None:
    """Until the daemon's first look at ``tile`` is in the journal (before that, its turns are history)."""
    daemon.wait_running()
    wait_for(
        lambda: Journal(default_journal_path()).followed_until(tile) is not None, what=f"{tile} followed"
    )


def write_config(path: Path, socket: str, tiles: dict, routes: list[dict], **settings: object) -> Path:
    """A routes.yaml at ``path`` for the tmux server ``socket`` (catch_up_s 120 unless ``settings`` say)."""
    doc = {"version": 1, "tmux": {"socket_name": socket}, "tiles": tiles, "routes": routes,
           "settings": {"catch_up_s": 120, **settings}}
    path.write_text(json.dumps(doc))  # JSON is YAML
    return path
