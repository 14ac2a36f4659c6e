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
from dataclasses import dataclass
from pathlib import Path

from plugins.gemini.screen import input_draft
from plugins.gemini.session import SessionFile
from tests.fakes.gemini_api import gemini_home
from tests.support.agent_home import PANE_ENV, AgentHome, new_project
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

__all__ = ["GeminiHome", "make_gemini_home"]


@dataclass(frozen=True)
class GeminiHome(AgentHome):
    command = "gemini"
    reader = SessionFile
    home: Path

    def session_files(self) -> list[Path]:
        return sorted((self.home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))

    def start(self, server: TmuxServer, args: str = "") -> str:
        """A pane running ``gemini`` in the project, at its empty input box; returns the pane id."""
        pane = self.launch(server, args)
        wait_for(lambda: self.session_files() and input_draft(server.capture(pane)) == "", 60,
                 what="Gemini CLI's input box and session file")
        return pane

    def settings(self) -> dict:
        return json.loads((self.home / ".gemini" / "settings.json").read_text())


def make_gemini_home(root: Path, *, api_url: str, gemini_bin: Path, state: Path | None = None,
                     trusted: bool = True) -> GeminiHome:
    home, project = new_project(root)
    env = gemini_home(home, project, api_url=api_url)
    if not trusted:
        (home / ".gemini" / "trustedFolders.json").unlink()
    env.update({"PATH": f"{gemini_bin.parent}:/usr/local/bin:/usr/bin:/bin", **PANE_ENV})
    if state is not None:
        env["XDG_STATE_HOME"] = str(state)  # where the hooks spool their records
    return GeminiHome(home=home, project=project, env=env)
