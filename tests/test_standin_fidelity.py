"""The stand-ins are claims about the real agents: each is held, state by state, to the screens recorded from
the real CLI of the version it stands in for (tests/fixtures/*/screens/, tests/record_paste_screens.py).

A stand-in runs in a real pane of the recorded size; it is driven into each state — idle, a short paste
drawn inline, a long one drawn as the agent's placeholder, busy, asking for approval — and its screen is
read with the real agent's adapter, exactly as the recording is: what the input holds, whether the agent
is busy, what it waits for, the keys that would answer its prompt. Every reading must be the same (a
placeholder's running number aside).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.system.text import sanitize, strip_ansi
from plugins.claude_code.adapter import ClaudeCodeAdapter
from plugins.claude_code.screen import input_box
from plugins.codex.adapter import CodexAdapter
from plugins.codex.screen import composer_draft
from plugins.copilot.adapter import CopilotAdapter
from plugins.copilot.screen import input_draft as copilot_draft
from plugins.gemini.adapter import GeminiAdapter
from plugins.gemini.screen import input_draft as gemini_draft
from plugins.opencode.adapter import OpenCodeAdapter
from plugins.opencode.screen import input_draft
from tests.fakes.agent_tui import agent_tui_command
from tests.support.paths import FIXTURES, REPO
from tests.support.polling import wait_for
from tests.support.standin_targets import say
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux]

#: per agent: the adapter, its input reader, whether it reads escapes, the recordings of the pinned CLI
AGENTS = {
    "claude": (ClaudeCodeAdapter, input_box, False, "claude-code-2.1.332",
               "claude-code-2.1.332/screens/screen_working.txt",
               "claude-code-2.1.332/screens/screen_permission_prompt.txt"),
    "codex": (CodexAdapter, composer_draft, True, "codex-0.171.0",
              "codex/screens/screen_working_before_first_token.txt", "codex/approval/screen_approval.txt"),
    "opencode": (OpenCodeAdapter, input_draft, False, "opencode-1.18.33",
                 "opencode/screens/screen_working.txt", "opencode/screens/screen_permission_prompt.txt"),
    "gemini": (GeminiAdapter, gemini_draft, False, "gemini-cli-0.61.0",
               "gemini-cli-0.61.0/screens/screen_27_nohooks_busy_0s.txt",
               "gemini-cli-0.61.0/screens/screen_11_approval_prompt.txt"),
    "copilot": (CopilotAdapter, copilot_draft, False, "copilot-1.0.102",
                "copilot-1.0.102/screens/screen_13_slow_busy_3s.txt",
                "copilot-1.0.102/screens/screen_09_approval_prompt.txt"),
}
#: the pastes compared: short ones drawn inline, long ones as placeholders, in every agent
CASES = ("line1_short", "lines2_short", "lines3_short", "lines4", "lines12_280", "line151", "line801",
         "line1001", "lines30_2000")
_HOME = {"claude": "CLAUDE_CONFIG_DIR", "codex": "CODEX_HOME", "opencode": "XDG_DATA_HOME",
         "gemini": "GEMINI_CLI_HOME", "copilot": "COPILOT_HOME"}


def reading(agent: str, screen: str) -> dict[str, object]:
    """What the agent's adapter reads from ``screen``: the input (a placeholder's number as ``#K``, wrapping
    and indentation ignored), busy (from the screen's text, as the adapters look), what it waits for, and
    the keys ``baton approve`` and ``baton deny`` would type."""
    cls, read, *_ = AGENTS[agent]
    adapter = cls(EngineContext(name="t", tile=Tile(pane="%0", agent=agent), tmux=None))  # type: ignore[arg-type]
    draft = read(screen)
    shown = None if draft is None else re.sub(r"#\d+", "#K", "".join(draft.split()))
    busy = adapter.is_busy(strip_ansi(screen))
    return {"input": shown, "busy": busy, "waiting": adapter.waiting_for(screen),
            "approve": adapter.answer_keys(screen, True), "deny": adapter.answer_keys(screen, False)}


class Standin:
    def __init__(self, server: TmuxServer, tmp: Path, agent: str, work_s: float = 0.2) -> None:
        folder = AGENTS[agent][3]
        self.facts = json.loads((FIXTURES / folder / "screens" / "paste_cases.json").read_text())
        size = self.facts["pane"]
        self.server, self.agent, self.escapes = server, agent, AGENTS[agent][2]
        self.log = tmp / "standin.jsonl"
        self.pane = server.new_pane(agent_tui_command(agent, self.log, work_s=work_s), cwd=tmp,
                                    env={_HOME[agent]: str(tmp / "home"), "PYTHONPATH": str(REPO)},
                                    width=size["width"], height=size["height"])
        wait_for(lambda: "stand-in" in server.capture(self.pane), what=f"the {agent} stand-in")

    def screen(self) -> str:
        return self.server.run("capture-pane", "-p", "-J", *(["-e"] if self.escapes else []), "-t", self.pane)


def recorded_screen(agent: str, name: str) -> str:
    """The screen recorded for the paste case ``name`` (or ``idle``), as its paste_cases.json lists it."""
    folder, escapes = AGENTS[agent][3], AGENTS[agent][2]
    screens = FIXTURES / folder / "screens"
    facts = json.loads((screens / "paste_cases.json").read_text(encoding="utf-8"))
    shot = next(s for s in facts["session"] if s["case"] == name)
    return (screens / next(f for f in shot["files"] if f.endswith(".ansi.txt") == escapes)).read_text()


@pytest.mark.anyio
@pytest.mark.parametrize("agent", list(AGENTS))
async def test_a_stand_in_draws_its_input_as_the_real_cli_does(agent: str, tmux_server: TmuxServer,
                                                               tmp_path: Path) -> None:
    standin = Standin(tmux_server, tmp_path, agent)
    assert reading(agent, standin.screen()) == reading(agent, recorded_screen(agent, "idle")), "idle"
    for case in CASES:
        text = sanitize(standin.facts["cases"][case]["pasted"])
        want = reading(agent, recorded_screen(agent, case))
        await tmux_server.tmux.paste(standin.pane, text)
        wait_for(lambda: reading(agent, standin.screen())["input"], what=f"{case} in the stand-in's input")
        assert reading(agent, standin.screen()) == want, case
        tmux_server.run("send-keys", "-t", standin.pane, "C-u")
        wait_for(lambda: reading(agent, standin.screen())["input"] == "", what="the input cleared")


@pytest.mark.parametrize("agent", list(AGENTS))
def test_a_stand_in_is_busy_and_asks_for_approval_as_the_real_cli_does(agent: str, tmux_server: TmuxServer,
                                                                      tmp_path: Path) -> None:
    *_, working, asking = AGENTS[agent]
    standin = Standin(tmux_server, tmp_path, agent, work_s=3.0)
    real_busy = reading(agent, (FIXTURES / working).read_text())
    real_asking = reading(agent, (FIXTURES / asking).read_text())
    say(tmux_server, standin.pane, "work on it")
    wait_for(lambda: reading(agent, standin.screen())["busy"], what="the stand-in busy")
    assert reading(agent, standin.screen()) == real_busy
    wait_for(lambda: not reading(agent, standin.screen())["busy"], what="the stand-in done")
    say(tmux_server, standin.pane, "NEEDS_APPROVAL: touch a file")
    wait_for(lambda: reading(agent, standin.screen())["waiting"], what="the stand-in asking")
    assert reading(agent, standin.screen()) == real_asking
    assert str(real_asking["waiting"]).startswith("permission prompt") and real_busy["busy"]
