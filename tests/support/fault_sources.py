"""The source agents of the fault matrix (tests/test_fault_matrix.py): one per built-in file-reading adapter.

Each runs a real process in a real tmux pane, named like its agent, and makes turns in two steps the test
can time around a daemon kill: ``begin(i)`` (the prompt is on disk, the agent is busy) and ``finish(i)`` (the
answer ``answer i`` and the turn's end are on disk). The files are written the way the recorded ones are:
Claude Code's session file ``sessions/{PID}.json`` and transcript lines (tests/support/claude.py's
Transcript, from tests/fixtures/claude-code), Codex's lock file and rollout lines (tests/support/codex.py),
the OpenCode store (tests/fakes/opencode_store.py), the demo agent that writes its own transcript, and the
Gemini CLI and Copilot CLI stand-ins of tests/fakes/agent_tui.py (which write their agent's files as recorded,
held to the recordings by tests/test_standin_fidelity.py).
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path

from pipeline.system import proc
from plugins.claude_code.files import project_folder_name
from plugins.codex.resolve import find_codex_process
from tests.fakes.opencode_store import StoreWriter
from tests.fakes.standin_tui import standin_command
from tests.support.agents import demo_agent_command, read_log
from tests.support.claude import Transcript, text
from tests.support.codex import CodexHome, append, iso, rollout_path, turn_start
from tests.support.paths import REPO
from tests.support.polling import wait_for
from tests.support.standin_targets import StandinTarget, say
from tests.support.tmux import TmuxServer

__all__ = ["SOURCES", "Source"]


class Source:
    """A source agent in a pane; ``tile`` is its routes.yaml entry."""

    agent = ""
    #: the demo agent finishes by itself, ``work_s`` after the prompt; stand-ins finish when told
    finishes_itself = False

    def __init__(self, server: TmuxServer, tmp: Path) -> None:
        self.server, self.tmp = server, tmp
        self.pane = self.start()

    @property
    def tile(self) -> dict[str, str]:
        return {"pane": self.pane, "agent": self.agent}

    def start(self) -> str:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        """What the daemon needs in its environment to find this agent's files (most find them by default)."""
        return {}

    def begin(self, i: int) -> None:
        raise NotImplementedError

    def finish(self, i: int) -> None:
        raise NotImplementedError

    def answered(self) -> int:
        """How many turns have finished on disk."""
        return self.done

    done = 0


class DemoSource(Source):
    agent = "demo"
    finishes_itself = True
    work_s = 0.3

    def start(self) -> str:
        pane = self.server.new_pane(demo_agent_command("a", role="writer", work_s=self.work_s))
        wait_for(lambda: "demo❯" in self.server.capture(pane), what="the demo agent")
        return pane

    def begin(self, i: int) -> None:
        wait_for(
            lambda: self.answered() >= i and self.server.capture(self.pane).rstrip().endswith("demo❯"),
            timeout=30,
            what=f"the demo agent to finish turn {i - 1}",
        )
        self.server.type(self.pane, f"task {i}")

    def finish(self, i: int) -> None:
        wait_for(lambda: self.answered() > i, timeout=30, what=f"the demo agent's answer {i}")

    def answers(self) -> list[str]:
        """Its own transcript's answers (the target, a demo agent too, keeps its own file beside it)."""
        path = self.tmp / "state" / "batonpass" / "demo-agents" / f"{self.server.pane_pid(self.pane)}.jsonl"
        if not path.exists():
            return []
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [r["text"] for r in records if r["type"] == "answer"]

    def answered(self) -> int:
        return len(self.answers())

    def expected(self, turns: int) -> list[str]:
        return self.answers()[:turns]


class ClaudeSource(Source):
    """A copy of ``sleep`` named ``claude``; the test writes its session file and transcript."""

    agent = "claude"

    def start(self) -> str:
        bin_dir = self.tmp / "bin"
        bin_dir.mkdir(exist_ok=True)
        shutil.copy(shutil.which("sleep"), bin_dir / "claude")
        self.config, self.cwd = self.tmp / "claude-config", self.tmp / "proj"
        self.cwd.mkdir(exist_ok=True)
        pane = self.server.new_pane(
            "bash --norc --noprofile -c 'claude 3600 & wait'",
            cwd=self.cwd,
            env={"PATH": f"{bin_dir}:/usr/bin:/bin", "CLAUDE_CONFIG_DIR": str(self.config)},
        )
        shell = self.server.pane_pid(pane)
        self.pid = wait_for(
            lambda: proc.find_agent(shell, {"claude"}), what="claude under the pane's shell"
        ).pid
        self.session = str(uuid.uuid4())
        folder = self.config / "projects" / project_folder_name(str(self.cwd))
        folder.mkdir(parents=True)
        self.tx = Transcript(folder / f"{self.session}.jsonl", self.session)
        self.status("idle")
        return pane

    def status(self, status: str) -> None:
        path = self.config / "sessions" / f"{self.pid}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "pid": self.pid,
            "sessionId": self.session,
            "cwd": str(self.cwd),
            "startedAt": int(time.time() * 1000),
            "procStart": str(proc.read_proc(self.pid).start_ticks),
            "status": status,
            "statusUpdatedAt": time.time_ns() // 1000,
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)

    def begin(self, i: int) -> None:
        self.status("busy")
        self.tx.prompt(f"task {i}")

    def finish(self, i: int) -> None:
        self.tx.assistant(f"msg_{uuid.uuid4().hex[:8]}", text(f"answer {i}"))
        self.tx.end()
        self.status("idle")
        self.done += 1

    def expected(self, turns: int) -> list[str]:
        return [f"answer {i}" for i in range(turns)]


class CodexSource(Source):
    """bash started as ``codex`` (its comm), holding a thread lock; the test appends its rollout."""

    agent = "codex"

    def start(self) -> str:
        self.home = CodexHome(self.tmp / "codex-home")
        self.project = self.tmp / "api"
        self.project.mkdir(exist_ok=True)
        bin_dir = self.tmp / "bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "codex").symlink_to("/bin/bash")
        pane = self.server.new_pane(
            f"{bin_dir / 'codex'} -c 'sleep 3600; true'",
            cwd=self.project,
            env={"CODEX_HOME": str(self.home.root)},
        )
        found = wait_for(lambda: find_codex_process(self.server.pane_pid(pane)), what="the codex stand-in")
        self.tid = self.home.thread(found.started_at + 1.0)  # the TUI's thread exists from startup
        self.rollout = rollout_path(self.home.root, self.tid, found.started_at + 1.0)
        now = time.time()
        append(
            self.rollout,
            [
                {
                    "timestamp": iso(now),
                    "type": "session_meta",
                    "payload": {
                        "id": self.tid,
                        "timestamp": iso(now),
                        "cwd": str(self.project),
                        "originator": "codex-tui",
                    },
                }
            ],
        )
        return pane

    def begin(self, i: int) -> None:
        append(self.rollout, turn_start(f"turn-{self.tid[:8]}-{i}", f"task {i}", time.time()))

    def finish(self, i: int) -> None:
        append(
            self.rollout,
            [
                {
                    "timestamp": iso(time.time()),
                    "type": "event_msg",
                    "payload": {
                        "type": "task_complete",
                        "turn_id": f"turn-{self.tid[:8]}-{i}",
                        "last_agent_message": f"answer {i}",
                    },
                }
            ],
        )
        self.done += 1

    def expected(self, turns: int) -> list[str]:
        return [f"answer {i}" for i in range(turns)]


class OpenCodeSource(Source):
    """The raw-mode stand-in named ``opencode``; the test writes its session's turns into the store."""

    agent = "opencode"

    def start(self) -> str:
        self.project, data = self.tmp / "web", self.tmp / "data"
        self.project.mkdir()
        self.writer = StoreWriter(data / "opencode" / "opencode.db")
        command = standin_command(
            "opencode", prompt="┃  ", busy="⬝⬝■■  esc interrupt", answer="screen answer {n}"
        )
        pane = self.server.new_pane(
            command,
            cwd=self.project,
            env={"XDG_DATA_HOME": str(data), "HOME": str(self.tmp), "PYTHONPATH": str(REPO)},
        )
        wait_for(lambda: "opencode stand-in" in self.server.capture(pane), what="the opencode stand-in")
        # shapes the scenario: its session is created after it started, as with the real OpenCode
        time.sleep(1.1)
        self.session = self.writer.session(self.project)
        return pane

    def begin(self, i: int) -> None:
        user = self.writer.user(self.session, f"task {i}")
        self.step = self.writer.step(self.session, user)

    def finish(self, i: int) -> None:
        self.writer.finish(self.session, self.step, texts=(f"answer {i}",))
        self.done += 1

    def expected(self, turns: int) -> list[str]:
        return [f"answer {i}" for i in range(turns)]


class StandinSource(Source):
    """A stand-in of tests/fakes/agent_tui.py as the source: typed ``task i``, it writes the prompt to its
    agent's files, works ``work_s`` and writes ``answer to: task i``, as its real agent would. Its files are
    found through the variable its adapter reads (:meth:`env`: the daemon needs it too)."""

    finishes_itself = True
    work_s = 0.3

    def start(self) -> str:
        self.standin = StandinTarget(self.server, self.tmp, self.agent, name="a", work_s=self.work_s)
        return self.standin.pane

    def env(self) -> dict[str, str]:
        return self.standin.env()

    def begin(self, i: int) -> None:
        wait_for(lambda: self.answered() >= i, timeout=30, what=f"the {self.agent} stand-in's answer {i - 1}")
        say(self.server, self.pane, f"task {i}")

    def finish(self, i: int) -> None:
        wait_for(lambda: self.answered() > i, timeout=30, what=f"the {self.agent} stand-in's answer {i}")

    def answered(self) -> int:
        return sum("answer" in r for r in read_log(self.standin.log))

    def expected(self, turns: int) -> list[str]:
        return [f"answer to: task {i}" for i in range(turns)]


class GeminiSource(StandinSource):
    agent = "gemini"


class CopilotSource(StandinSource):
    agent = "copilot"


class QwenSource(StandinSource):
    agent = "qwen"


class PiSource(StandinSource):
    agent = "pi"


class ClineSource(StandinSource):
    agent = "cline"


SOURCES: dict[str, type[Source]] = {
    "demo": DemoSource,
    "claude": ClaudeSource,
    "codex": CodexSource,
    "opencode": OpenCodeSource,
    "gemini": GeminiSource,
    "copilot": CopilotSource,
    "qwen": QwenSource,
    "pi": PiSource,
    "cline": ClineSource,
}
