"""The placeholder rules, held to the screens recorded from the real CLIs (tests/record_paste_screens.py): for
every text pasted into the real Claude Code, Codex, OpenCode, Gemini CLI, Copilot CLI, Qwen Code, pi (1.6.0
and the old package's 0.73.1) and Cline and left unsubmitted, the adapter reads the input as the screen shows
it, takes it for that paste (the text drawn inline, or the agent's placeholder with the matching count), and
not for a paste of another text. The stand-ins' placeholder rule (tests/fakes/agent_tui.py) gives the same
placeholder the real CLI drew, for every case."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.plugin.agents import AgentAdapter
from pipeline.system.text import sanitize
from pipeline.system.tmux import Tmux
from plugins.claude_code.adapter import ClaudeCodeAdapter
from plugins.claude_code.screen import input_box
from plugins.cline.adapter import ClineAdapter
from plugins.cline.screen import input_draft as cline_draft
from plugins.codex.adapter import CodexAdapter
from plugins.codex.screen import composer_draft
from plugins.copilot.adapter import CopilotAdapter
from plugins.copilot.screen import input_draft as copilot_draft
from plugins.gemini.adapter import GeminiAdapter
from plugins.gemini.screen import input_draft as gemini_draft
from plugins.opencode.adapter import OpenCodeAdapter
from plugins.opencode.screen import input_draft
from plugins.pi.adapter import PiAdapter
from plugins.pi.screen import input_draft as pi_draft
from plugins.qwen.adapter import QwenAdapter
from plugins.qwen.screen import input_draft as qwen_draft
from tests.fakes.agent_tui import placeholder
from tests.support.paths import FIXTURES
from tests.support.standin_targets import adapter_name

#: per agent: the recordings, the adapter, how it reads the input from a screen, and whether with escapes
READERS: dict[str, tuple[str, type[AgentAdapter], Callable[[str], str | None], bool]] = {
    "claude": ("claude-code-2.1.332", ClaudeCodeAdapter, input_box, False),
    "codex": ("codex-0.171.0", CodexAdapter, composer_draft, True),
    "opencode": ("opencode-1.18.33", OpenCodeAdapter, input_draft, False),
    "gemini": ("gemini-cli-0.61.0", GeminiAdapter, gemini_draft, False),
    "copilot": ("copilot-1.0.102", CopilotAdapter, copilot_draft, False),
    "qwen": ("qwen-code-0.24.4", QwenAdapter, qwen_draft, True),
    "pi": ("pi-1.6.0", PiAdapter, pi_draft, False),
    "pi-0.73.1": ("pi-0.73.1", PiAdapter, pi_draft, False),
    "cline": ("cline-3.0.65", ClineAdapter, cline_draft, False),
}
#: recorded with more than one paste in the input, or after the Enter: not one unsubmitted paste
NOT_ONE_PASTE = {"two_pastes", "same_twice", "submitted", "after_turn"}


def recorded(agent: str) -> list[tuple[str, str, str, list[str], int]]:
    """(case, screen, pasted text, placeholders the real CLI drew, pane rows) of each single paste."""
    folder, _, _, escapes = READERS[agent]
    screens = FIXTURES / folder / "screens"
    facts = json.loads((screens / "paste_cases.json").read_text(encoding="utf-8"))
    out = []
    for shot in facts["session"]:
        case = shot["case"]
        if case == "idle" or case in NOT_ONE_PASTE or case not in facts["cases"] or shot.get("rows"):
            continue
        file = next(f for f in shot["files"] if f.endswith(".ansi.txt") == escapes)
        sized = re.match(r"rows(\d+)_", case)
        rows = int(sized.group(1)) if sized else facts["pane"]["height"]
        out.append((case, (screens / file).read_text(encoding="utf-8"), facts["cases"][case]["pasted"],
                    shot["placeholders_on_screen"], rows))
    return out


def adapter(agent: str) -> AgentAdapter:
    cls = READERS[agent][1]
    tile = Tile(pane="%0", agent=adapter_name(agent))
    return cls(EngineContext(name="t", tile=tile, tmux=Tmux(socket_name="unused")))


CASES = [(agent, *shot) for agent in READERS for shot in recorded(agent)]


@pytest.mark.parametrize(("agent", "case", "screen", "pasted", "marks", "rows"), CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_the_adapter_takes_the_recorded_input_for_its_paste_and_no_other(
        agent: str, case: str, screen: str, pasted: str, marks: list[str], rows: int) -> None:
    draft = READERS[agent][2](screen)
    if draft is None:  # the input scrolled out of its box (Claude Code in a short pane): nothing to judge
        pytest.skip(f"{case}: the recorded screen shows no input line to read")
    assert draft.strip(), f"{case}: the recorded paste reads as an empty input"
    a = adapter(agent)
    assert a.shows_paste(draft.strip(), sanitize(pasted)), (case, draft[:200])
    other = sanitize(pasted) + "\nand one more line that was never pasted"
    assert not a.shows_paste(draft.strip(), other), f"{case}: another text taken for this paste"
    assert not a.shows_paste(draft.strip(), "a person's own words"), case


@pytest.mark.parametrize(("agent", "case", "screen", "pasted", "marks", "rows"), CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_the_stand_ins_placeholder_is_the_one_the_real_cli_drew(
        agent: str, case: str, screen: str, pasted: str, marks: list[str], rows: int) -> None:
    count = int(re.search(r"#(\d+)", marks[0]).group(1)) if marks and "#" in marks[0] else 1
    mine = placeholder(agent, sanitize(pasted), count, rows)
    assert ([mine] if mine else []) == marks, (case, mine, marks)


@pytest.mark.parametrize("agent", list(READERS))
def test_the_recorded_idle_input_is_empty(agent: str) -> None:
    folder, _, read, escapes = READERS[agent]
    screens = FIXTURES / folder / "screens"
    facts = json.loads((screens / "paste_cases.json").read_text(encoding="utf-8"))
    idle = next(shot for shot in facts["session"] if shot["case"] == "idle")
    file = next(f for f in idle["files"] if f.endswith(".ansi.txt") == escapes)
    assert read((screens / file).read_text()) == ""


def test_fixtures_hold_every_agent() -> None:
    assert {agent for agent, *_ in CASES} == set(READERS)


@pytest.mark.parametrize("agent", list(READERS))
def test_two_pastes_in_one_input_are_not_taken_for_one(agent: str) -> None:
    folder, _, read, escapes = READERS[agent]
    screens = FIXTURES / folder / "screens"
    facts = json.loads((screens / "paste_cases.json").read_text(encoding="utf-8"))
    # Claude Code expands a placeholder pasted again into one copy of the text: that is one paste
    for case in ("two_pastes",) if agent == "claude" else ("two_pastes", "same_twice"):
        screen = (screens / f"paste_{case}{'.ansi' if escapes else ''}.txt").read_text(encoding="utf-8")
        draft = (read(screen) or "").strip()
        assert draft, case
        for name in facts["pastes_per_case"][case]:
            text = sanitize(facts["cases"][name]["pasted"])
            assert not adapter(agent).shows_paste(draft, text), (case, draft)
