"""Codex seen from its screen and its hooks, on every recorded screen and hook payload."""

from __future__ import annotations

import json

import pytest

from pipeline.system.text import strip_ansi
from plugins.codex.adapter import CodexAdapter
from plugins.codex.hooks import notify_turn
from plugins.codex.screen import composer_draft, strip_furniture
from tests.support.paths import FIXTURES

CODEX = FIXTURES / "codex"

#: screen -> (the input line: None = not on screen, "" = placeholder only; a busy marker on screen)
SCREENS = {
    "screen_startup.txt": ("", False),
    "screen_startup_hooks_bypass.txt": ("", False),
    "screen_working_before_first_token.txt": ("", True),
    "screen_working_streaming.txt": ("", False),  # nothing shows while the answer streams (docs/agents.md)
    "screen_working.txt": ("", False),
    "screen_tool_running.txt": ("", True),
    "screen_tool_done.txt": ("", False),
    "screen_done.txt": ("", False),
    "screen_interrupted.txt": ("", False),
    "screen_f2_warnings.txt": (None, False),  # a dialog over the input line
    "screen_after_quit_pane1.txt": (None, False),
    "screen_after_quit_no_daemon.txt": (None, False),
}


def test_every_recorded_screen_is_listed() -> None:
    assert sorted(p.name for p in (CODEX / "screens").iterdir()) == sorted(SCREENS)


@pytest.mark.parametrize("name", sorted(SCREENS))
def test_input_line_and_busy_marker(name: str) -> None:
    screen = (CODEX / "screens" / name).read_text()
    draft, busy = SCREENS[name]
    assert composer_draft(screen) == draft
    assert composer_draft(strip_ansi(screen)) == draft  # the placeholder text is known too
    adapter = CodexAdapter.__new__(CodexAdapter)
    assert adapter.is_busy(strip_ansi(screen)) is busy


def test_a_draft_is_not_the_placeholder() -> None:
    line = "\x1b[1m›\x1b[0m\x1b[39m\x1b[49m {}\x1b[0m"
    assert composer_draft(line.format("fix the bug")) == "fix the bug"
    assert composer_draft(line.format("\x1b[2mImplement {feature}")) == ""  # any dim placeholder
    assert composer_draft(line.format("\x1b[38;5;2mgreen, not dim")) == "green, not dim"
    assert composer_draft("› a draft typed after a history line\n") == "a draft typed after a history line"


def test_screen_furniture_is_trimmed_from_a_terminal_answer() -> None:
    assert strip_furniture("• The answer.\n  more\n\n  Worked for 2s • 13:31\n") == "The answer.\n  more"


def test_every_notify_payload() -> None:
    records = [json.loads(line) for line in (CODEX / "hooks" / "notify.jsonl").read_text().splitlines()]
    for record in records:
        thread, turn, text = notify_turn(record["payload"])
        assert (thread, turn) == (record["payload"]["thread-id"], record["payload"]["turn-id"])
        assert text == record["payload"]["last-assistant-message"]
        assert json.loads(record["argv"][-1]) == record["payload"]  # one JSON argument, last


def test_every_hook_payload() -> None:
    records = [json.loads(line) for line in (CODEX / "hooks" / "hooks.jsonl").read_text().splitlines()]
    parsed = [notify_turn(r["stdin"]) for r in records]
    stops = [r["stdin"] for r in records if r["stdin"]["hook_event_name"] == "Stop"]
    assert [p for p in parsed if p] == [
        (s["session_id"], s["turn_id"], s["last_assistant_message"]) for s in stops
    ]
    assert len(stops) == 1 and sum(p is None for p in parsed) == len(records) - 1


def test_malformed_payloads_are_not_turns() -> None:
    for payload in (
        {},
        {"type": "agent-turn-complete"},
        {"type": "agent-turn-complete", "thread-id": 3, "turn-id": "t"},
        {"hook_event_name": "Interrupt", "session_id": "s", "turn_id": "t"},
        {"value": [1, 2]},
    ):
        assert notify_turn(payload) is None
    assert notify_turn({"type": "agent-turn-complete", "thread-id": "a", "turn-id": "b",
                        "last-assistant-message": None}) == ("a", "b", None)
