"""Gemini CLI in tests: the real CLI (from npm) in an isolated home that starts straight into its input box,
offline, against :class:`tests.fakes.gemini_api.FakeGemini`.

What makes Gemini CLI 0.61.0 skip its first-run dialogs (seen on the real CLI): ``trustedFolders.json``
naming the project ``TRUST_FOLDER`` (no trust dialog, so no restart into a new process and session), and
``security.auth.selectedType: "gemini-api-key"`` in ``settings.json`` with ``GEMINI_API_KEY`` set (no
auth or key dialog). ``GEMINI_CLI_HOME`` replaces the home it keeps ``.gemini`` in. The pane runs ``env
-i``, so nothing of the machine's environment (a real key) leaks in. ``make_gemini_home(trusted=False)``
leaves the folder out of ``trustedFolders.json``: the CLI starts at the trust dialog (the auth settings still
keep the auth and key dialogs away), and answering it restarts the CLI.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from plugins.gemini.screen import input_draft
from plugins.gemini.session import SessionFile
from tests.fakes.gemini_api import gemini_home
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

__all__ = ["GeminiHome", "make_gemini_home"]


@dataclass(frozen=True)
class GeminiHome:
    home: Path
    project: Path
    env: dict[str, str]

    def shell_command(self) -> str:
        pairs = " ".join(shlex.quote(f"{k}={v}") for k, v in self.env.items())
        return f'env -i {pairs} TMUX="$TMUX" TMUX_PANE="$TMUX_PANE" bash --norc --noprofile'

    def session_files(self) -> list[Path]:
        return sorted((self.home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))

    def prompts(self) -> list[str]:
        """Every prompt typed into any of its sessions, as the session files hold them."""
        out = []
        for path in self.session_files():
            session = SessionFile(path)
            session.read()
            out += session.state.prompts()
        return out

    def launch(self, server: TmuxServer, args: str = "") -> str:
        """A pane where ``gemini`` was just typed (not waited for); returns the pane id."""
        pane = server.new_pane(self.shell_command(), cwd=self.project, width=120, height=40)
        server.type(pane, f"gemini {args}".strip())
        return pane

    def start(self, server: TmuxServer, args: str = "") -> str:
        """A pane running ``gemini`` in the project, at its empty input box; returns the pane id."""
        pane = self.launch(server, args)
        wait_for(lambda: self.session_files() and input_draft(server.capture(pane)) == "", 60,
                 what="Gemini CLI's input box and session file")
        return pane

    @staticmethod
    def say(server: TmuxServer, pane: str, text: str) -> None:
        """Type ``text`` and submit it as a person would: Gemini CLI takes an Enter less than 30 ms after
        a typed key for a newline (its FAST_RETURN_TIMEOUT)."""
        server.type(pane, text, enter=False)
        time.sleep(0.2)  # shapes the scenario (a person's pause before Enter)
        server.run("send-keys", "-t", pane, "Enter")

    def settings(self) -> dict:
        return json.loads((self.home / ".gemini" / "settings.json").read_text())


def make_gemini_home(root: Path, *, api_url: str, gemini_bin: Path, state: Path | None = None,
                     trusted: bool = True) -> GeminiHome:
    home, project = root / "home", root / "proj" / "my-app"
    project.mkdir(parents=True)
    (project / "app.py").write_text('print("hello from my-app")\n')
    env = gemini_home(home, project, api_url=api_url)
    if not trusted:
        (home / ".gemini" / "trustedFolders.json").unlink()
    env.update({"PATH": f"{gemini_bin.parent}:/usr/local/bin:/usr/bin:/bin", "TERM": "tmux-256color",
                "LANG": "C.UTF-8", "PS1": "$ "})
    if state is not None:
        env["XDG_STATE_HOME"] = str(state)  # where the hooks spool their records
    return GeminiHome(home=home, project=project, env=env)
