"""A private tmux server per test, and the processes a run must not leave behind.

Each test that needs tmux gets its own server on a unique socket (``tmux -L``) started with ``-f /dev/null``
so the user's tmux.conf plays no part; the fixture kills only that server.
"""

from __future__ import annotations

import os
import shlex
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from pipeline.system.tmux import Tmux, remove_socket_file

__all__ = ["RUN_MARK", "SOCKET_PREFIX", "TmuxServer", "each_write", "left_behind", "tmux_server"]

#: the socket names of this run's TmuxServers (``tmux -L``); the end-of-suite check looks for these
SOCKET_PREFIX = f"baton-test-{os.getpid()}-"
#: set in every process this run starts (a tmux server keeps the environment it started with), so the
#: end-of-suite check finds what this run left behind, and nothing of another run beside it
RUN_MARK = "BATON_TEST_RUN"
os.environ[RUN_MARK] = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"


class TmuxServer:
    """A private tmux server for one test."""

    def __init__(self, tmp: Path) -> None:
        self.socket = f"{SOCKET_PREFIX}{uuid.uuid4().hex[:8]}"
        self.tmux = Tmux(socket_name=self.socket, config_file="/dev/null")
        self.tmp = tmp
        self._sessions = 0

    def run(self, *args: str, check: bool = True) -> str:
        return self.tmux.run_sync(*args, check=check)

    def new_pane(self, command: str | None = None, *, cwd: str | Path | None = None,
                 env: dict[str, str] | None = None, width: int = 160, height: int = 40) -> str:
        """A new session (so panes never share a window's size) running ``command`` (default: a plain
        bash with a fixed prompt). Returns the pane id."""
        self._sessions += 1
        base_env = {"PS1": "$ ", "TERM": "tmux-256color", "LANG": "C.UTF-8", "HISTFILE": "/dev/null",
                    "XDG_STATE_HOME": os.environ.get("XDG_STATE_HOME", str(self.tmp / "state"))}
        base_env.update(env or {})
        cmd = command or "bash --norc --noprofile"
        args = ["new-session", "-d", "-P", "-F", "#{pane_id}", "-s", f"s{self._sessions}", "-x", str(width),
                "-y", str(height), "-c", str(cwd or self.tmp)]
        env_prefix = shlex.join(["env", *(f"{k}={v}" for k, v in base_env.items())])
        return self.run(*args, f"exec {env_prefix} {cmd}").strip()

    def capture(self, pane: str) -> str:
        return self.run("capture-pane", "-p", "-J", "-t", pane)

    def type(self, pane: str, text: str, enter: bool = True) -> None:
        """Type like a person would (send-keys -l), for setting up a scene — not how batonpass types."""
        self.run("send-keys", "-t", pane, "-l", text)
        if enter:
            self.run("send-keys", "-t", pane, "Enter")

    def pane_pid(self, pane: str) -> int:
        return int(self.run("display-message", "-p", "-t", pane, "#{pane_pid}").strip())

    def kill(self) -> None:
        """Stop the server and remove its socket file (tmux 3.3 leaves it: one per test in /tmp/tmux-UID)."""
        self.run("kill-server", check=False)
        remove_socket_file(self.tmux.socket_file)


@pytest.fixture
def tmux_server(tmp_path: Path) -> Iterator[TmuxServer]:
    server = TmuxServer(tmp_path)
    try:
        yield server
    finally:
        server.kill()


def each_write(tmux_server: TmuxServer, seen: Callable[[list[str]], object]) -> None:
    """From now on, ``seen`` gets the command names of each control-mode write (every command goes
    through ``run_all``, one write each call)."""
    control = tmux_server.tmux._control_client()
    run_all = control.run_all

    async def counted(*commands: tuple[str, ...]) -> list:
        seen([c[0] for c in commands])
        return await run_all(*commands)

    control.run_all = counted  # type: ignore[method-assign]


def _ours(proc: psutil.Process, cmdline: str) -> bool:
    """A tmux process of a test's server, or a tmux or batonpass process this run started, or a Cline hub
    daemon one of its Clines started (it outlives the pane and the tmux server)."""
    if SOCKET_PREFIX in cmdline:
        return True
    if proc.name().startswith("tmux") or "pipeline.cli" in cmdline or "/baton " in f"{cmdline} " \
            or "--cline-hub-daemon" in cmdline:
        return proc.environ().get(RUN_MARK) == os.environ[RUN_MARK]
    return False


def left_behind() -> dict[psutil.Process, list[str]]:
    """Live tmux and batonpass processes this run started (pytest itself aside), with their arguments."""
    found = {}
    for proc in psutil.process_iter():
        try:
            args = proc.cmdline()
            if proc.pid == os.getpid() or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if _ours(proc, " ".join(args)):
                found[proc] = args
        except psutil.Error:
            continue
    return found
