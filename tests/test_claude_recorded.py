"""The recorded session files, hook records and screens of Claude Code 2.1.197, read by the adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.spool import HookRecord
from pipeline.system.text import strip_ansi
from pipeline.system.tmux import Tmux
from plugins.claude_code.adapter import BUSY_STATUSES, ClaudeCodeAdapter
from plugins.claude_code.files import read_session_file
from plugins.claude_code.screen import input_box, screen_answer
from tests.support.paths import FIXTURES

CC = FIXTURES / "claude-code"
SCREENS = CC / "screens"


def session_states() -> list[dict]:
    return [
        json.loads(line)["content"] for line in (CC / "session-file-states.jsonl").read_text().splitlines()
    ]


@pytest.mark.parametrize("state", session_states(), ids=lambda s: f"{s['pid']}-{s['status']}")
def test_every_recorded_session_file_state_parses(tmp_path: Path, state: dict) -> None:
    path = tmp_path / f"{state['pid']}.json"
    path.write_text(json.dumps(state))
    session = read_session_file(path)
    assert session.session_id == state["sessionId"] and session.proc_start == state["procStart"]
    # waiting on a permission prompt is busy for a target and never a completion
    assert (session.status in BUSY_STATUSES) == (state["status"] in ("busy", "waiting"))
    if state["status"] == "waiting":
        assert session.waiting_for == "permission prompt"


def test_the_recorded_live_session_file_parses() -> None:
    session = read_session_file(CC / "home" / ".claude" / "sessions" / "15694.json")
    assert (session.pid, session.status, session.cwd) == (15694, "idle", "/home/dev/my-app")


@pytest.mark.anyio
async def test_only_stop_hook_records_can_be_completions() -> None:
    """Every other recorded hook (SessionStart, UserPromptSubmit, Pre/PostToolUse, PermissionRequest,
    Notification, SubagentStop, SessionEnd) is dropped before anything else is looked at."""
    adapter = ClaudeCodeAdapter(
        EngineContext(name="t", tile=Tile(pane="%0"), tmux=Tmux(socket_name="never-started"))
    )
    records = [json.loads(line) for line in (CC / "hooks" / "hooks.jsonl").read_text().splitlines()]
    events = {r["stdin"]["hook_event_name"] for r in records}
    assert {"Stop", "SubagentStop", "UserPromptSubmit", "SessionStart"} <= events
    for record in records:
        if record["stdin"]["hook_event_name"] != "Stop":
            assert (
                await adapter.hook_completion(HookRecord("claude", record["stdin"], "%0", record["t"]))
                is None
            )


IDLE_SCREENS = ["screen_startup.txt", "screen_done.txt", "screen_tool_done.txt", "screen_continue_done.txt",
                "screen_interrupted.txt"]
BUSY_SCREENS = ["screen_working.txt", "screen_tool_working.txt", "screen_continue_working.txt"]


@pytest.mark.parametrize("name", IDLE_SCREENS + BUSY_SCREENS)
def test_the_input_box_is_found_empty_on_every_recorded_screen_that_has_one(name: str) -> None:
    screen = (SCREENS / name).read_text()
    assert input_box(screen) == ""
    adapter = ClaudeCodeAdapter.__new__(ClaudeCodeAdapter)
    assert adapter.is_busy(strip_ansi(screen)) == (name in BUSY_SCREENS)  # live captures have no escapes


@pytest.mark.parametrize("name", ["screen_permission_prompt.txt", "screen_first_run_no_onboarding.txt"])
def test_dialogs_are_not_the_input_box(name: str) -> None:
    assert input_box((SCREENS / name).read_text()) is None


@pytest.mark.parametrize(
    ("name", "first", "last"),
    [
        (
            "screen_done.txt",
            "I refactored the auth middleware to validate tokens before routing.",
            "- tests/test_auth.py",
        ),
        ("screen_tool_done.txt", "The command printed hello. Everything works.", "- (none)"),
        (
            "screen_continue_done.txt",
            "I refactored the auth middleware to validate tokens before routing.",
            "- tests/test_auth.py",
        ),
    ],
)
def test_screen_fallback_answer_is_the_last_answer_block(name: str, first: str, last: str) -> None:
    lines = screen_answer((SCREENS / name).read_text()).split("\n")
    assert lines[0] == first and lines[-1] == last and not any(ln.startswith("●") for ln in lines)


NEW_SCREENS = FIXTURES / "claude-code-2.1.332" / "screens"
REFACTORED = (
    "I refactored the auth middleware to validate tokens before routing.\n\nprint('hi')\n\nFiles changed:\n"
    "- src/auth/middleware.py\n- src/auth/tokens.py\n- tests/test_auth.py"
)


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        ("screen_done.txt", REFACTORED),  # the done line, then tmux's focus-events notice above the box
        ("screen_continue_done.txt", REFACTORED),  # the done line, then the effort line
        ("screen_subagent_done.txt", REFACTORED),
        (
            "screen_tool_done.txt",
            "The command printed hello. Everything works.\n\necho hello\n\nFiles changed:\n- (none)",
        ),
    ],
)
def test_screen_fallback_on_2_1_332_screens_is_only_the_answer(name: str, answer: str) -> None:
    assert screen_answer((NEW_SCREENS / name).read_text()) == answer


def test_a_done_line_of_an_earlier_turn_does_not_cut_the_answer_after_it() -> None:
    screen = "● first answer\n\n✻ Baked for 2s · done 7:40 AM\n\n❯ next\n\n● second answer\n  goes on\n"
    assert screen_answer(screen) == "second answer\ngoes on"
