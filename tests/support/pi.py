"""pi in tests: the real CLI (from npm) in an isolated home that starts straight into its input box, offline,
against :class:`tests.fakes.openai_chat.FakeChat` (``api: "openai-completions"``).

``$PI_CODING_AGENT_DIR`` holds ``models.json`` (a provider ``fake`` whose ``baseUrl`` is the fake server, its
one model priced, so pi records a cost) and ``settings.json`` (``defaultProvider``/``defaultModel``);
``PI_OFFLINE=1``, ``PI_SKIP_VERSION_CHECK=1`` and ``PI_TELEMETRY=0`` keep it off the network. The pane runs
``env -i`` with Node 22 first on its PATH (pi 1.x needs it; 0.73.1 runs on the machine's Node too), so
nothing of the machine's environment (a real key) leaks in. ``trust_dialog=True`` gives the project a
``.pi/settings.json``: pi 1.x then asks whether to trust the folder before its input box shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from plugins.pi.screen import input_draft
from plugins.pi.session import SessionFile
from tests.support.agent_home import PANE_ENV, AgentHome, new_project
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

__all__ = ["PiHome", "make_pi_home"]

PRICE = {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}


@dataclass(frozen=True)
class PiHome(AgentHome):
    command = "pi"
    reader = SessionFile
    home: Path
    agent: Path

    def session_files(self) -> list[Path]:
        return sorted((self.agent / "sessions").glob("*/*.jsonl"))

    def start(self, server: TmuxServer, args: str = "") -> str:
        """A pane running ``pi`` in the project, at its empty input box; returns the pane id."""
        pane = self.launch(server, args)
        wait_for(lambda: input_draft(server.capture(pane)) == "", 60, what="pi's input box")
        return pane


def make_pi_home(root: Path, *, api_url: str, pi_bin: Path, node: Path | None = None,
                 state: Path | None = None, trust_dialog: bool = False) -> PiHome:
    home, project = new_project(root)
    agent = home / ".pi" / "agent"
    agent.mkdir(parents=True)
    if trust_dialog:
        (project / ".pi").mkdir()
        (project / ".pi" / "settings.json").write_text("{}\n")
    fake = {"baseUrl": api_url, "api": "openai-completions", "apiKey": "sk-fake",
            "models": [{"id": "fake-model", "name": "Fake", "cost": PRICE}]}
    models = {"providers": {"fake": fake}}
    (agent / "models.json").write_text(json.dumps(models, indent=2))
    settings = {"defaultProvider": "fake", "defaultModel": "fake-model"}
    (agent / "settings.json").write_text(json.dumps(settings))
    path = f"{pi_bin.parent}:/usr/local/bin:/usr/bin:/bin"
    env = {"HOME": str(home), "PI_CODING_AGENT_DIR": str(agent), "PI_OFFLINE": "1",
           "PI_SKIP_VERSION_CHECK": "1",
           "PI_TELEMETRY": "0", "PATH": f"{node.parent}:{path}" if node is not None else path, **PANE_ENV}
    if state is not None:
        env["XDG_STATE_HOME"] = str(state)  # where the extension hook spools its records
    return PiHome(home=home, agent=agent, project=project, env=env)
