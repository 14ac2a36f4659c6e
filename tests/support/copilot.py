"""The real GitHub Copilot CLI in tests: an isolated ``$COPILOT_HOME`` pointed at a fake OpenAI-compatible
server on 127.0.0.1 (BYOK, offline), the project trusted ahead (no folder-trust dialog), and the pane command.

What makes Copilot CLI 1.0.102 start straight into its input, offline (tests/fixtures/copilot-1.0.102):
``COPILOT_PROVIDER_BASE_URL``/``_TYPE=openai``/``_API_KEY``, ``COPILOT_MODEL``, ``COPILOT_OFFLINE=true``,
``COPILOT_AUTO_UPDATE=false``, and ``config.json``'s ``trustedFolders`` holding the project (what "Yes, and
remember" writes). The package cache the native binary unpacks its JavaScript into on first start
(``COPILOT_PKG_CACHE_HOME``) is shared between tests, next to the npm cache. The pane runs ``env -i``, so
nothing from the machine's environment leaks in; it starts Copilot as ``copilot`` through PATH (bash → node
→ the native binary, as a person's shell would).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from plugins.copilot.events import SessionEvents
from tests.fakes.npm_agents import cache_root

__all__ = ["CopilotHome", "make_copilot_home"]


@dataclass(frozen=True)
class CopilotHome:
    home: Path
    copilot: Path
    project: Path
    env: dict[str, str]

    def shell_command(self) -> str:
        pairs = " ".join(shlex.quote(f"{k}={v}") for k, v in self.env.items())
        return f'env -i {pairs} TMUX="$TMUX" TMUX_PANE="$TMUX_PANE" bash --norc --noprofile'

    def events_files(self) -> list[Path]:
        return sorted((self.copilot / "session-state").glob("*/events.jsonl"))

    def prompts(self) -> list[str]:
        """Every ``user.message`` of every session, as written (a line being written is skipped)."""
        out = []
        for path in self.events_files():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("type") == "user.message":
                    out.append(record["data"].get("content", ""))
        return out

    def state(self) -> SessionEvents:
        """The newest session's turns."""
        state = SessionEvents()
        files = self.events_files()
        for line in files[-1].read_text(encoding="utf-8").splitlines() if files else []:
            try:
                state.feed(json.loads(line))
            except ValueError:
                continue
        return state


def make_copilot_home(root: Path, *, api_url: str, copilot_bin: Path, version: str,
                      extra_env: dict[str, str] | None = None) -> CopilotHome:
    home = root / "home"
    copilot = home / ".copilot"
    project = root / "proj" / "my-app"
    copilot.mkdir(parents=True)
    project.mkdir(parents=True)
    (project / "app.py").write_text('print("hello from my-app")\n')
    (copilot / "config.json").write_text(json.dumps({"trustedFolders": [os.path.realpath(project)]}))
    env = {
        "HOME": str(home), "COPILOT_HOME": str(copilot),
        "COPILOT_PKG_CACHE_HOME": str(cache_root().parent / f"copilot-pkg-{version}"),
        "PATH": f"{copilot_bin.parent}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "TERM": "tmux-256color", "LANG": "C.UTF-8", "PS1": "$ ",
        "COPILOT_PROVIDER_BASE_URL": api_url, "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_PROVIDER_API_KEY": "fake-key", "COPILOT_MODEL": "fake",
        "COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false",
        **(extra_env or {}),
    }
    return CopilotHome(home=home, copilot=copilot, project=project, env=env)
