"""Running the real Claude Code in a test: an isolated HOME that skips onboarding, and the pane command.

What makes Claude Code 2.1.197 start straight into its input box, offline (seen on the
real CLI): ``~/.claude.json`` with onboarding done, the API key's last 20
characters approved and the project trusted; ``ANTHROPIC_BASE_URL`` pointing at the fake API with a key;
the non-essential traffic, telemetry and auto-updater switched off; and starting it as ``claude`` through
PATH (so that its process name is ``claude``). The pane runs ``env -i``, so nothing from the machine's
own environment (a real API key, a running Claude Code's variables) leaks in.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

__all__ = ["API_KEY", "ClaudeHome", "make_claude_home"]

API_KEY = "sk-ant-fake-batonpass-tests-0123456789"


@dataclass(frozen=True)
class ClaudeHome:
    home: Path
    config: Path
    project: Path
    env: dict[str, str]

    def shell_command(self) -> str:
        """A clean bash in the pane, with only the variables Claude Code needs — and tmux's own
        ``TMUX``/``TMUX_PANE``, which a Stop hook reports to tell panes apart."""
        pairs = " ".join(shlex.quote(f"{k}={v}") for k, v in self.env.items())
        return f'env -i {pairs} TMUX="$TMUX" TMUX_PANE="$TMUX_PANE" bash --norc --noprofile'


    def session_files(self) -> list[Path]:
        return sorted((self.config / "sessions").glob("*.json"))

    def transcripts(self) -> list[Path]:
        return sorted((self.config / "projects").glob("*/*.jsonl"))


def make_claude_home(
    root: Path,
    *,
    api_url: str,
    claude_bin: Path,
    version: str,
    project_name: str = "my-app",
    extra_env: dict[str, str] | None = None,
) -> ClaudeHome:
    home = root / "home"
    config = home / ".claude"
    project = root / "proj" / project_name
    config.mkdir(parents=True)
    project.mkdir(parents=True)
    (project / "app.py").write_text('print("hello from my-app")\n')
    state = {
        "hasCompletedOnboarding": True, "lastOnboardingVersion": version, "theme": "dark",
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
        "projects": {os.path.realpath(project): {"hasTrustDialogAccepted": True,
                                                 "hasCompletedProjectOnboarding": True, "allowedTools": []}},
    }
    # with CLAUDE_CONFIG_DIR set, Claude Code keeps this file inside that folder; without, in HOME
    for path in (home / ".claude.json", config / ".claude.json"):
        path.write_text(json.dumps(state, indent=2))
    (config / "settings.json").write_text("{}\n")
    env = {
        "HOME": str(home), "CLAUDE_CONFIG_DIR": str(config),
        "PATH": f"{claude_bin.parent}:/usr/local/bin:/usr/bin:/bin",
        "TERM": "tmux-256color", "LANG": "C.UTF-8", "PS1": "$ ",
        "ANTHROPIC_BASE_URL": api_url, "ANTHROPIC_API_KEY": API_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
        **(extra_env or {}),
    }
    return ClaudeHome(home=home, config=config, project=project, env=env)
