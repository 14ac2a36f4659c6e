"""Claude Code in tests: the real CLI in an isolated HOME (below), and without it a pane whose process is
named ``claude`` (:class:`Scene`) with session files and transcript lines written as Claude Code writes them
(:class:`Transcript`).

Running the real Claude Code: an isolated HOME that skips onboarding, and the pane command.

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
import shutil
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.spool import HookRecord
from pipeline.system import proc
from plugins.claude_code.adapter import ClaudeCodeAdapter
from plugins.claude_code.files import project_folder_name
from tests.fakes.npm_agents import CLAUDE_CODE, NpmInstallError, install
from tests.support.paths import FIXTURES
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

__all__ = ["API_KEY", "ClaudeHome", "SCREENS", "Scene", "Transcript", "claude_bin", "make_claude_home",
           "text"]

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


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The real Claude Code from npm (cached; the version of tests/agent_versions.py): a fixture for the
    files that run it (tests/test_claude_e2e.py, tests/test_workflow_e2e.py)."""
    try:
        return install(*CLAUDE_CODE)
    except NpmInstallError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"cannot install Claude Code from npm: {exc}")
        pytest.skip(f"cannot install Claude Code from npm (not in CI, so skipped): {exc}")


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


# ---- transcripts and a pane named claude ---------------------------------------------------------

SCREENS = FIXTURES / "claude-code" / "screens"


class Scene:
    """A pane with a process named claude, and its Claude Code files."""

    def __init__(self, server: TmuxServer, tmp: Path, *, screen: str | None = None) -> None:
        bin_dir = tmp / "bin"
        bin_dir.mkdir(exist_ok=True)
        shutil.copy(shutil.which("sleep"), bin_dir / "claude")
        self.config, self.cwd = tmp / "config", tmp / "proj"
        self.cwd.mkdir(exist_ok=True)
        show = f"cat {screen}; " if screen else ""
        self.pane = server.new_pane(
            f"bash --norc --noprofile -c '{show}claude 300 & wait'",
            cwd=self.cwd,
            env={"PATH": f"{bin_dir}:/usr/bin:/bin", "CLAUDE_CONFIG_DIR": str(self.config)},
        )
        shell = server.pane_pid(self.pane)
        self.pid = wait_for(
            lambda: proc.find_agent(shell, {"claude"}), what="claude under the pane's shell"
        ).pid
        self.session_id = str(uuid.uuid4())
        self.ctx = EngineContext(name="coder", tile=Tile(pane=self.pane, agent="claude"), tmux=server.tmux)
        self.adapter = ClaudeCodeAdapter(self.ctx)
        self.tx: Transcript | None = None

    def folders(self) -> tuple[Path, Path]:
        """The folders the adapter follows: the session files', and the project's (its transcripts)."""
        return self.config / "sessions", self.config / "projects" / project_folder_name(str(self.cwd))

    def status(self, status: str, **extra: object) -> None:
        path = self.config / "sessions" / f"{self.pid}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"pid": self.pid, "sessionId": self.session_id, "cwd": str(self.cwd),
                "startedAt": int(time.time() * 1000), "procStart": str(proc.read_proc(self.pid).start_ticks),
                "status": status, "statusUpdatedAt": time.time_ns() // 1000, **extra}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)

    def transcript(self) -> Transcript:
        folder = self.config / "projects" / project_folder_name(str(self.cwd))
        folder.mkdir(parents=True, exist_ok=True)
        if self.tx is None or self.tx.session != self.session_id:
            self.tx = Transcript(folder / f"{self.session_id}.jsonl", self.session_id)
        return self.tx

    def hook(
        self, key: str | None, text: str, *, pane: str | None = "same", event: str = "Stop"
    ) -> HookRecord:
        payload = {"session_id": self.session_id, "hook_event_name": event, "last_assistant_message": text,
                   "transcript_path": str(self.transcript().path)}
        if key:
            payload["prompt_id"] = key
        return HookRecord("claude", payload, self.pane if pane == "same" else pane, time.time())



class Transcript:
    """Writes transcript lines the way Claude Code 2.1.197 does (one per content block, parentUuid chain)."""

    def __init__(self, path: Path, session: str | None = None) -> None:
        self.path, self.session = path, session or str(uuid.uuid4())
        self.parent: str | None = None
        self.path.touch()

    def line(self, obj: dict, *, chain: bool = True) -> dict:
        if chain:
            obj = {"parentUuid": self.parent, "isSidechain": False, "uuid": str(uuid.uuid4()),
                   "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                   "sessionId": self.session, "cwd": "/home/dev/app", **obj}
            self.parent = obj["uuid"] if not obj.get("isSidechain") else self.parent
        return obj

    def write(self, *objs: dict) -> None:
        with self.path.open("ab") as f:
            for obj in objs:
                f.write(json.dumps(obj, ensure_ascii=False).encode() + b"\n")

    def prompt(self, text: str, key: str | None = None) -> str:
        key = key or str(uuid.uuid4())
        self.write(self.line({"type": "user", "promptId": key, "message": {"role": "user", "content": text}}))
        return key

    def assistant(self, msg_id: str, *blocks: dict, stop: str | None = "end_turn", **extra) -> None:
        for block in blocks:
            self.write(self.line({"type": "assistant", **extra, "message": {
                "id": msg_id, "model": extra.pop("model", "claude-opus-4-8"), "role": "assistant",
                "stop_reason": stop, "content": [block]}}))

    def end(self, hooks: bool = True) -> None:
        if hooks:
            self.write(self.line({"type": "system", "subtype": "stop_hook_summary"}))
        self.write(self.line({"type": "system", "subtype": "turn_duration", "durationMs": 1000}))

    def turn(self, prompt: str, answer: str) -> str:
        key = self.prompt(prompt)
        self.assistant(f"msg_{uuid.uuid4().hex[:8]}", text(answer))
        self.end()
        return key


def text(t: str) -> dict:
    return {"type": "text", "text": t}
