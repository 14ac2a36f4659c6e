"""The stand-ins are claims about the real agents: each is held, state by state, to the screens recorded from
the real CLI of the version it stands in for (tests/fixtures/*/screens/, tests/record_paste_screens.py).

A stand-in runs in a real pane of the recorded size; it is driven into each state — idle, a short paste
drawn inline, a long one drawn as the agent's placeholder, busy, asking for approval — and its screen is
read with the real agent's adapter, exactly as the recording is: what the input holds, whether the agent
is busy, what it waits for, the keys that would answer its prompt. Every reading must be the same (a
placeholder's running number aside). pi asks nothing before a tool: its stand-in is held to the recorded
project-trust question at start instead (1.x; the old package's 0.73.1 asks none).
"""

from __future__ import annotations

import contextlib
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
from plugins.pi.adapter import PiAdapter
from plugins.pi.screen import input_draft as pi_draft
from plugins.qwen.adapter import QwenAdapter
from plugins.qwen.screen import input_draft as qwen_draft
from tests.fakes.agent_tui import agent_tui_command
from tests.support.paths import FIXTURES, REPO
from tests.support.polling import wait_for
from tests.support.standin_targets import StandinTarget, adapter_name, say
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
    "qwen": (QwenAdapter, qwen_draft, True, "qwen-code-0.24.4", "qwen-code-0.24.4/screens/busy.ansi",
             "qwen-code-0.24.4/screens/permission.ansi"),
    "pi": (PiAdapter, pi_draft, False, "pi-1.6.0", "pi-1.6.0/screens/busy.txt",
           "pi-1.6.0/screens/trust_dialog.txt"),
    "pi-0.73.1": (PiAdapter, pi_draft, False, "pi-0.73.1", "pi-0.73.1/screens/busy.txt", None),
}
#: the pastes compared, in the order they were recorded: short ones drawn inline, long ones as placeholders,
#: in every agent; two of one label (1001 chars), each cleared before the next: Qwen Code numbers the second
CASES = ("line1_short", "lines2_short", "lines3_short", "lines4", "lines12_280", "line151", "line801",
         "lines3_chars1001", "line1001", "lines30_2000")


def reading(agent: str, screen: str) -> dict[str, object]:
    """What the agent's adapter reads from ``screen``: the input (a placeholder's number as ``#K``, wrapping
    and indentation ignored), busy (from the screen's text, as the adapters look), what it waits for, and
    the keys ``baton approve`` and ``baton deny`` would type."""
    cls, read, *_ = AGENTS[agent]
    tile = Tile(pane="%0", agent=adapter_name(agent))
    adapter = cls(EngineContext(name="t", tile=tile, tmux=None))  # type: ignore[arg-type]
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
        env = StandinTarget.home_env(agent, tmp / "home")
        self.pane = server.new_pane(agent_tui_command(agent, self.log, work_s=work_s), cwd=tmp,
                                    env={**env, "PYTHONPATH": str(REPO)},
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
    await draws_as_recorded(standin, CASES)


#: the edges of the rules that count lines and UTF-16 units (recorded for Qwen Code and pi): 10 lines inline,
#: 11 a placeholder; 1000 characters inline, 1001 a placeholder; 991 code points that are 1001 UTF-16 units
#: (pi: a placeholder). Qwen Code scrolls a long inline paste in its box (line1000: 11 rows in its 10), as its
#: stand-in does (both of its views: tests/test_qwen_inline.py).
EDGES = ("lines10_100", "lines11_110", "lines3_chars1001", "line1000", "line1001", "emoji_cp991")
EDGES_BY_AGENT = {"pi": EDGES, "pi-0.73.1": EDGES, "qwen": EDGES[:-1]}


@pytest.mark.anyio
@pytest.mark.parametrize("agent", list(EDGES_BY_AGENT))
async def test_a_stand_in_draws_the_edges_of_its_placeholder_rule_as_the_real_cli_does(
        agent: str, tmux_server: TmuxServer, tmp_path: Path) -> None:
    await draws_as_recorded(Standin(tmux_server, tmp_path, agent), EDGES_BY_AGENT[agent])


async def draws_as_recorded(standin: Standin, cases: tuple[str, ...]) -> None:
    """Each case pasted into the stand-in reads as its recording does; the input cleared after each."""
    agent, tmux_server = standin.agent, standin.server
    for case in cases:
        text = sanitize(standin.facts["cases"][case]["pasted"])
        want = reading(agent, recorded_screen(agent, case))
        await tmux_server.tmux.paste(standin.pane, text)
        wait_for(lambda: reading(agent, standin.screen())["input"], what=f"{case} in the stand-in's input")
        with contextlib.suppress(AssertionError):  # a second render may follow (Qwen Code scrolls its box)
            wait_for(lambda want=want: reading(agent, standin.screen()) == want, timeout=3, what=case)
        assert reading(agent, standin.screen()) == want, case
        tmux_server.run("send-keys", "-t", standin.pane, "C-u")
        wait_for(lambda: reading(agent, standin.screen())["input"] == "", what="the input cleared")


@pytest.mark.parametrize("agent", list(AGENTS))
def test_a_stand_in_is_busy_and_asks_for_approval_as_the_real_cli_does(agent: str, tmux_server: TmuxServer,
                                                                      tmp_path: Path) -> None:
    *_, working, asking = AGENTS[agent]
    standin = Standin(tmux_server, tmp_path, agent, work_s=3.0)
    real_busy = reading(agent, (FIXTURES / working).read_text())
    say(tmux_server, standin.pane, "work on it")
    wait_for(lambda: reading(agent, standin.screen())["busy"], what="the stand-in busy")
    assert reading(agent, standin.screen()) == real_busy and real_busy["busy"]
    wait_for(lambda: not reading(agent, standin.screen())["busy"], what="the stand-in done")
    if adapter_name(agent) == "pi":  # it asks nothing before a tool: the turn just runs
        say(tmux_server, standin.pane, "NEEDS_APPROVAL: touch a file")
        wait_for(lambda: "answer to: NEEDS_APPROVAL" in standin.screen(), what="the tool turn's end")
        assert reading(agent, standin.screen())["waiting"] is None
        return
    real_asking = reading(agent, (FIXTURES / str(asking)).read_text())
    say(tmux_server, standin.pane, "NEEDS_APPROVAL: touch a file")
    wait_for(lambda: reading(agent, standin.screen())["waiting"], what="the stand-in asking")
    assert reading(agent, standin.screen()) == real_asking
    assert str(real_asking["waiting"]).startswith("permission prompt")


@pytest.mark.parametrize("agent", ["pi", "pi-0.73.1"])
def test_the_pi_stand_in_asks_to_trust_a_folder_with_pi_settings_as_the_real_cli_does(
        agent: str, tmux_server: TmuxServer, tmp_path: Path) -> None:
    """pi 1.x asks at start in a folder with ``.pi/`` settings (tests/fixtures/pi-1.6.0/screens/
    trust_dialog.txt): the stand-in's question reads the same, and its answer keys take it; 0.73.1 asks
    nothing there (docs/agent-versions.md)."""
    target = StandinTarget(tmux_server, tmp_path, agent, trust_dialog=True)
    screen = lambda: tmux_server.capture(target.pane)  # noqa: E731
    if agent == "pi-0.73.1":
        wait_for(lambda: reading(agent, screen())["input"] == "", what="the old pi's input box, no question")
        return
    real = reading(agent, (FIXTURES / "pi-1.6.0/screens/trust_dialog.txt").read_text())
    wait_for(lambda: reading(agent, screen())["waiting"], what="the trust question")
    assert reading(agent, screen()) == real
    third = reading(agent, (FIXTURES / "pi-1.6.0/screens/trust_dialog_third.txt").read_text())
    tmux_server.run("send-keys", "-t", target.pane, "Down", "Down")
    wait_for(lambda: reading(agent, screen()) == third, what="the third choice selected, as recorded")
    tmux_server.run("send-keys", "-t", target.pane, "Enter")
    wait_for(lambda: reading(agent, screen())["input"] == "", what="the input box once trusted")
