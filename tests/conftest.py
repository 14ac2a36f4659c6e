"""Shared test fixtures: a private tmux server per test, and helpers to wait on real panes.

Each test that needs tmux gets its own server on a unique socket (``tmux -L``) started with ``-f /dev/null``
so the user's tmux.conf plays no part; the fixture kills only that server. Waiting is by condition with a
deadline, never by fixed sleeps (the one exception, checking that nothing more happens, goes through
:func:`quiet_for`), and no test asserts a wall-clock timing.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from pipeline.system.tmux import Tmux, remove_socket_file

REPO = Path(__file__).resolve().parent.parent
#: the socket names of this run's TmuxServers (``tmux -L``); the end-of-suite check looks for these
SOCKET_PREFIX = f"baton-test-{os.getpid()}-"
#: set in every process this run starts (a tmux server keeps the environment it started with), so the
#: end-of-suite check finds what this run left behind, and nothing of another run beside it
RUN_MARK = "BATON_TEST_RUN"
os.environ[RUN_MARK] = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
#: recorded agent files, part of the suite (see tests/fixtures/README.md); nothing reads outside the repo
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if shutil.which("tmux") is None:
        skip = pytest.mark.skip(reason="tmux is not installed")
        for item in items:
            if "tmux" in item.keywords:
                item.add_marker(skip)


def wait_for(
    predicate: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05, what: str = ""
) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail the test with ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


async def until(
    predicate: Callable[[], Any], timeout: float = 30.0, what: str = "", interval: float = 0.05
) -> Any:
    """:func:`wait_for` for async tests: poll without blocking the event loop."""
    import anyio

    with anyio.move_on_after(timeout):
        while not (value := predicate()):
            await anyio.sleep(interval)
        return value
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")


def quiet_for(seconds: float, why: str) -> None:
    """Let ``seconds`` pass so that what must NOT happen (``why``: a second hand-off, a completion before
    its time) would have shown by now. An absence has no event to wait on, so this is the one fixed wait
    in the suite; anything that does happen is waited for with :func:`wait_for` / :func:`until`."""
    time.sleep(seconds)


async def aquiet_for(seconds: float, why: str) -> None:
    """:func:`quiet_for` for async tests: the event loop (and the pipeline under test) keeps running."""
    import anyio

    await anyio.sleep(seconds)


def first_look(pipeline: Any, tile: str) -> bool:
    """A screen-read tile (shell, terminal, amp) of a running pipeline has taken its first look: its turn
    mark is set, so what is typed from now on is a turn of its own, not part of the screen it found."""
    return getattr(pipeline.tiles[tile].adapter, "_mark", None) is not None


def watches(watcher: Any, *paths: Path) -> bool:
    """A running ``FileWatcher`` covers each of ``paths`` (it, or a folder above it): the watcher restarts
    when a subscriber needs a new folder, and a change written before that restart is seen late, if at all."""
    return all(any(root == p or root in p.parents for root in watcher.watching) for p in paths)


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


def each_write(tmux_server: TmuxServer, seen: Callable[[list[str]], object]) -> None:
    """From now on, ``seen`` gets the command names of each control-mode write (every command goes
    through ``run_all``, one write each call)."""
    control = tmux_server.tmux._control_client()
    run_all = control.run_all

    async def counted(*commands: tuple[str, ...]) -> list:
        seen([c[0] for c in commands])
        return await run_all(*commands)

    control.run_all = counted  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own XDG_STATE_HOME (journal, hook spool, demo agents' transcripts)."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.delenv("BATON_DEMO_HOME", raising=False)
    return state


@pytest.fixture(autouse=True)
def restore_root_logging() -> Iterator[None]:
    """Tests that call ``pipeline.cli.main()`` in-process set up logging; undo it for the next test."""
    import logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level


@pytest.fixture
def tmux_server(tmp_path: Path) -> Iterator[TmuxServer]:
    server = TmuxServer(tmp_path)
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def daemon_factory(tmp_path: Path):
    """`baton run` subprocesses (tests.test_faults.Daemon): started, killed, restarted; killed at the end."""
    from tests.test_faults import Daemon

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


def demo_agent_command(
    name: str = "agent", *, role: str = "echo", work_s: float = 0.3, log: Path | None = None
) -> str:
    """The shell command that runs the package's demo agent (a real raw-mode TUI with bracketed paste)."""
    cmd = [
        sys.executable,
        "-m",
        "plugins.demo.agent",
        "--name",
        name,
        "--role",
        role,
        "--work-s",
        str(work_s),
    ]
    if log is not None:
        cmd += ["--log", str(log)]
    return shlex.join(cmd)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def read_log(path: Path) -> list[dict[str, Any]]:
    """The demo agent's --log: one record per message received (and per input typed while busy)."""
    import json

    if not path.exists():
        return []
    # only whole lines: the agent may be halfway through writing a long one (a 3 MB message)
    text = path.read_text()
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line.strip()]


def messages(path: Path) -> list[str]:
    return [r["message"] for r in read_log(path) if "message" in r]


def _ours(proc: psutil.Process, cmdline: str) -> bool:
    """A tmux process of a test's server, or a tmux or batonpass process this run started."""
    if SOCKET_PREFIX in cmdline:
        return True
    if proc.name().startswith("tmux") or "pipeline.cli" in cmdline or "/baton " in f"{cmdline} ":
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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The suite leaves no tmux server, client or socket behind, nor a batonpass process: what it finds
    (its own only) is listed, ended and removed, and the run fails."""
    deadline = time.monotonic() + 5.0  # a server killed by the last test may take a moment to go
    while (procs := left_behind()) and time.monotonic() < deadline:
        time.sleep(0.05)
    names = {f"baton-demo-{os.getpid()}"}  # the demo, run in this process
    for args in procs.values():  # and every server name a process left behind was given
        names |= {value for flag, value in zip(args, args[1:], strict=False) if flag == "-L"}
    folder = Tmux(socket_name="x").socket_file.parent
    sockets = sorted(p for p in folder.glob("*") if p.name.startswith(SOCKET_PREFIX) or p.name in names)
    if not procs and not sockets:
        return
    lines = []
    clients_first = sorted(procs.items(), key=lambda item: "attach-session" not in item[1])
    for proc, args in clients_first:
        lines.append(f"  process {proc.pid}: {' '.join(args)[:160]}")
        with contextlib.suppress(psutil.Error):
            proc.kill()
            proc.wait(timeout=5)
    for path in sockets:
        lines.append(f"  socket {path}")
        remove_socket_file(path)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", "the test run left these behind (now ended and removed)", red=True)
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, red=True)
        else:
            print(line, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


# hypothesis: quick in CI; `HYPOTHESIS_PROFILE=fuzz pytest tests/test_hostile_input.py` for the long run
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("default", max_examples=150, deadline=None)
_hypothesis_settings.register_profile("fuzz", max_examples=int(os.environ.get("BATON_FUZZ_CASES", "100000")),
                                     deadline=None)
_hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
