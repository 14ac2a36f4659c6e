"""Cline in tests: the real CLI (a compiled binary from npm: no Node) in an isolated home that starts
straight into its input box, offline, against :class:`tests.fakes.openai_chat.FakeChat`.

What Cline 3.0.65 needs for that (seen on the real CLI): ``cline auth --provider openai --apikey K --modelid
M --baseurl URL`` with ``HOME`` set (it writes ``~/.cline/data/settings/providers.json``, provider
``openai-compatible``; without it the TUI opens its provider picker); the start-up notices marked shown in
``~/.cline/data/settings/cli-notices.json``; ``CLINE_NO_AUTO_UPDATE=1``; and a hub port of its own
(``CLINE_HUB_PORT``: the TUI starts a hub daemon, ``cline --cline-hub-daemon``, on a fixed port by default).
The hub daemon runs in its own session and outlives the pane and ``tmux kill-server``: :meth:`ClineHome.end`
ends it and any Cline of the home still there (found by its executable and the ``HOME`` in its
environment). The pane runs ``env -i``, so nothing of the machine's environment leaks in.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from plugins.cline.resolve import DAEMON_ARG
from plugins.cline.screen import input_draft
from plugins.cline.session import SessionFile
from tests.support.agent_home import PANE_ENV, AgentHome, new_project
from tests.support.polling import wait_for
from tests.support.tmux import RUN_MARK, TmuxServer

__all__ = ["ClineHome", "cline_session", "make_cline_home"]

NOTICES = {"shown": {"cline-cli-cline-pass-intro": True, "cline-cli-desktop-launch": True}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class ClineHome(AgentHome):
    command: ClassVar[str] = "cline"
    reader: ClassVar[Any] = SessionFile
    home: Path
    cline_bin: Path

    @property
    def data(self) -> Path:
        return self.home / ".cline" / "data"

    def session_files(self) -> list[Path]:
        """Its session records (``sessions/<id>/<id>.json``; the messages file beside each)."""
        records = (d / f"{d.name}.json" for d in self.data.glob("sessions/*"))
        return sorted(r for r in records if r.exists())

    def start(self, server: TmuxServer, *args: str) -> str:
        """A pane running ``cline`` in the project, at its empty input box; returns the pane id."""
        return self._ready(server, self.launch(server, shlex.join(args)))

    def start_in(self, server: TmuxServer, folder: Path) -> str:
        """A pane running ``cline`` in ``folder`` (another project of the same home), at its empty input box;
        returns the pane id."""
        folder.mkdir(parents=True, exist_ok=True)
        pane = server.new_pane(self.shell_command(), cwd=folder, width=120, height=40)
        server.type(pane, self.command)
        return self._ready(server, pane)

    def _ready(self, server: TmuxServer, pane: str) -> str:
        wait_for(lambda: self.draft(server, pane) == "", 60, what="Cline's input box")
        time.sleep(0.5)  # shapes the scenario: keys typed while it still starts are dropped
        return pane

    def session_of(self, prompt: str) -> Path:
        """The session record whose first prompt is ``prompt``."""
        [found] = [p for p in self.session_files() if prompt in str(json.loads(p.read_text()).get("prompt"))]
        return found

    @staticmethod
    def draft(server: TmuxServer, pane: str) -> str | None:
        return input_draft(server.capture(pane))

    def processes(self) -> list[int]:
        """The pids of every Cline of this home (its environment names it): TUIs and hub daemons."""
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                exe = os.readlink(f"/proc/{name}/exe")
                env = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if os.path.basename(exe) == "cline" and f"HOME={self.home}".encode() in env:
                found.append(int(name))
        return found

    def hubs(self) -> list[int]:
        """The pids of the hub daemons of this home."""
        return [pid for pid in self.processes() if _is_hub(pid)]

    def end(self) -> None:
        """End every Cline of this home once the tmux server is gone: the TUIs (they may linger a moment, and
        one may start its hub daemon as it goes) and the hub daemons, which outlive them. Done when none has
        run for a second; SIGKILL for one still there after 5 s."""
        began, calm = time.monotonic(), []

        def settled() -> bool:
            pids = self.processes()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM if time.monotonic() - began < 5 else signal.SIGKILL)
            if pids:
                calm.clear()
                return False
            calm.append(time.monotonic())
            return calm[-1] - calm[0] >= 1.0

        wait_for(settled, timeout=30, interval=0.1, what="every Cline process of this home to end")


def _is_hub(pid: int) -> bool:
    try:
        return DAEMON_ARG.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


def make_cline_home(root: Path, *, api_url: str, cline_bin: Path, state: Path | None = None,
                    auth: bool = True) -> ClineHome:
    """A home with Cline signed in to ``api_url`` (by the real ``cline auth``; not with ``auth=False``:
    it then opens its provider picker) and its notices shown."""
    home, project = new_project(root)
    env = {"HOME": str(home), "CLINE_NO_AUTO_UPDATE": "1", "CLINE_HUB_PORT": str(_free_port()),
           "PATH": f"{cline_bin.parent}:/usr/local/bin:/usr/bin:/bin", **PANE_ENV}
    if state is not None:
        env["XDG_STATE_HOME"] = str(state)  # where the hooks spool their records
    if RUN_MARK in os.environ:  # its hub daemon is this test run's (tests/support/tmux.left_behind)
        env[RUN_MARK] = os.environ[RUN_MARK]
    settings = home / ".cline" / "data" / "settings"
    settings.mkdir(parents=True)
    (settings / "cli-notices.json").write_text(json.dumps(NOTICES))
    if not auth:
        return ClineHome(home=home, project=project, env=env, cline_bin=cline_bin)
    done = subprocess.run([str(cline_bin), "auth", "--provider", "openai", "--apikey", "sk-fake", "--modelid",
                           "fake-model", "--baseurl", api_url], env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    return ClineHome(home=home, project=project, env=env, cline_bin=cline_bin)


@contextlib.contextmanager
def cline_session(server: TmuxServer, root: Path, *, api_url: str, cline_bin: Path,
                  state: Path | None = None) -> Iterator[ClineHome]:
    """A signed-in home (:func:`make_cline_home`) whose every Cline, the hub daemon too, is gone after: the
    tmux server is killed first (a TUI would start the hub again), then the rest ended."""
    home = make_cline_home(root, api_url=api_url, cline_bin=cline_bin, state=state)
    try:
        yield home
    finally:
        server.kill()
        home.end()
