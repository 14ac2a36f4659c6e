"""Turn ends of every Claude Code transcript shape: the recorded 2.1.197 and 2.1.332 files (background agents
included) and the older shapes (docs/agents.md, Older Claude Code; tests/fixtures/claude-code-old, written
from those facts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.spool import HookRecord
from pipeline.system.tmux import Tmux
from plugins.claude_code.adapter import ClaudeCodeAdapter
from plugins.claude_code.paste import normalized, unwrap_paste
from plugins.claude_code.reader import last_finished_turn, nothing_finished, recent_prompts
from plugins.claude_code.turns import TurnTracker
from tests.support.paths import FIXTURES

NEW = FIXTURES / "claude-code-2.1.332"
NEW_MAIN = NEW / "home/.claude/projects/-home-dev-my-app/291eb835-bf54-495e-8cdf-44a5fdbe4c06.jsonl"
NEW_AGENT = (
    NEW
    / "home/.claude/projects/-home-dev-my-app/291eb835-bf54-495e-8cdf-44a5fdbe4c06"
    / "subagents/agent-a896122a8c0ab3fe3.jsonl"
)
OLD = FIXTURES / "claude-code-old"
PARENT, NOTIFICATION = "de2a7a24-cee3-466b-a52e-22d735cada7b", "efc988bd-77f6-4d9f-bd70-c32489edf99d"
SUBAGENT_RESULT = (
    "I refactored the auth middleware to validate tokens before routing.\n\n```python\nprint('hi')\n```\n\n"
    "Files changed:\n- src/auth/middleware.py\n- src/auth/tokens.py\n- tests/test_auth.py\n"
)


def feed(path: Path, upto: int | None = None) -> tuple[TurnTracker, list]:
    tracker = TurnTracker(at_start=True)
    lines = path.read_bytes().split(b"\n")
    ends = tracker.feed_lines(lines[:upto] if upto else lines)
    return tracker, ends


def extract(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "extract", str(path), "--agent", "claude"],
                          capture_output=True, text=True, timeout=60)


# ---- 2.1.332: background agents -------------------------------------------------------------------


def test_the_turn_that_launched_a_background_agent_is_held_not_reported() -> None:
    """Lines 1–54: the Agent turn ends (end_turn, turn_duration with pendingBackgroundAgentCount 1) while
    the subagent runs: no end is reported for it, and the tracker says it waits for 1 background agent."""
    tracker, ends = feed(NEW_MAIN, 54)
    assert PARENT not in {e.key for e in ends}
    assert tracker.state == "background" and tracker.background == 1 and tracker.held.key == PARENT
    assert "waiting for 1 background agent to finish" in nothing_finished_at(NEW_MAIN, 54)


def nothing_finished_at(path: Path, upto: int) -> str:
    tracker, _ = feed(path, upto)
    return f"waiting for {tracker.background} background agent to finish" if tracker.held else ""


def test_the_notification_turn_is_the_completion_with_the_real_answer() -> None:
    tracker, ends = feed(NEW_MAIN, 62)
    [after] = [e for e in ends if e.key == NOTIFICATION]
    assert after.outcome == "completed" and after.reason == "turn_duration" and after.background == 0
    assert after.held_key == PARENT and after.text == SUBAGENT_RESULT
    assert tracker.held is None and tracker.state == "ended"
    # every turn of the file: one end each, the held one not among them
    _, all_ends = feed(NEW_MAIN)
    keys = [e.key for e in all_ends]
    assert PARENT not in keys and keys.count(NOTIFICATION) == 1


@pytest.mark.anyio
async def test_the_stop_pair_only_the_stop_without_running_agents_is_a_completion() -> None:
    adapter = ClaudeCodeAdapter(
        EngineContext(name="t", tile=Tile(pane="%0"), tmux=Tmux(socket_name="never-started"))
    )
    stops = [r for r in map(json.loads, (NEW / "hooks" / "hooks.jsonl").read_text().splitlines())
             if r["stdin"]["hook_event_name"] == "Stop"]
    by_prompt = {r["stdin"]["prompt_id"]: r for r in stops}
    held = by_prompt[PARENT]
    assert held["stdin"]["background_tasks"][0]["status"] == "running"
    assert await adapter.hook_completion(HookRecord("claude", held["stdin"], None, held["t"])) is None
    assert by_prompt[NOTIFICATION]["stdin"]["background_tasks"] == []


def test_a_subagent_transcript_has_no_main_chain_and_extract_says_so() -> None:
    with pytest.raises(LookupError, match="no main-chain turn: only subagent"):
        ClaudeCodeAdapter.extract_file(NEW_AGENT)
    result = extract(NEW_AGENT)
    assert result.returncode == 1 and "no main-chain turn" in result.stderr


# ---- older shapes (docs/agents.md, Older Claude Code) ------------------------------------------


def test_1_0_98_turns_keyed_by_uuid_end_at_the_next_prompt() -> None:
    path = OLD / "1.0.98-uuid-keyed.jsonl"
    _, ends = feed(path)
    assert [(e.reason, e.text.split("\n")[0]) for e in ends] == [
        (
            "next prompt",
            "The test expects 5; `add(2, 2)` is 4, so the test is wrong. I fixed the expectation.",
        ),
        ("local command", "All 12 tests pass."),
    ]
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    first_prompt = next(x for x in lines if x.get("type") == "user")
    assert ends[0].key == first_prompt["uuid"] and "promptId" not in first_prompt
    end = last_finished_turn(path)  # the last turn: text, no tool call, nothing after it
    assert end.text.startswith("One change: tests/test_math.py") and end.reason == "final text"
    assert extract(path).stdout == end.text + "\n"


def test_2_1_39_turns_end_by_stop_hook_summary_next_prompt_and_turn_duration() -> None:
    path = OLD / "2.1.39-no-end-turn.jsonl"
    tracker, ends = feed(path)
    got = [(e.outcome, e.reason, e.text.split(":")[0].split("\n")[0]) for e in ends]
    assert got == [
        ("completed", "next prompt", "It serves the HTTP API"),
        ("completed", "turn_duration", "Done"),
        # the blocking Stop hook continued that turn: its answer is the one after the feedback line
        (
            "completed",
            "next prompt",
            "The hook found a failing test; fixed the import. Added tests/test_app.py, all green.",
        ),
        ("failed", "interrupted", "Let me start with the"),
        ("failed", "api_error", "API Error"),
    ]
    assert tracker.answered and tracker.proof == "stop_hook_summary"
    end = last_finished_turn(path)
    assert end.text == "The build finished without errors." and end.reason == "stop_hook_summary"
    assert extract(path).stdout == "The build finished without errors.\n"


def test_unknown_lines_and_fields_are_skipped_never_fatal(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    body = (OLD / "2.1.39-no-end-turn.jsonl").read_text().splitlines()
    noise = ['{"type":"brand-new","x":1}', '{"type":"system","subtype":"future_thing"}', "not json", "[1,2]",
             '{"type":"assistant","message":"not a dict"}', '{"type":"user","message":{"content":42}}']
    path.write_text("\n".join(body[:5] + noise + body[5:]) + "\n")
    assert last_finished_turn(path).text == "The build finished without errors."


@pytest.mark.parametrize(
    ("lines", "why"),
    [
        ([], "no prompt was written"),
        (
            [{"type": "user", "promptId": "k", "uuid": "u1", "message": {"role": "user", "content": "go"}}],
            "still open",
        ),
        (
            [
                {"type": "user", "promptId": "k", "uuid": "u1", "message": {"role": "user", "content": "go"}},
                {
                    "type": "user",
                    "promptId": "k",
                    "uuid": "u2",
                    "message": {
                        "role": "user",
                        "content": [{"type": "text", "text": "[Request interrupted by user]"}],
                    },
                },
            ],
            "the last turn failed: interrupted",
        ),
    ],
)
def test_extract_says_why_nothing_finished(tmp_path: Path, lines: list[dict], why: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert last_finished_turn(path) is None and why in nothing_finished(path)
    result = extract(path)
    assert result.returncode == 1 and why in result.stderr


# ---- pasted prompts (2.1.332) --------------------------------------------------------------------


def test_the_paste_wrapper_is_removed_from_prompts_read_back(tmp_path: Path) -> None:
    prompt = "The reviewer says:\n\n- fix `a`\n- fix `b`\n\nFix what it asks for."
    wrapped = f'\n\n<pasted_content id="00d6">\n{prompt}\n</pasted_content id="00d6">\n'
    assert unwrap_paste(wrapped) == prompt and unwrap_paste(prompt) == prompt
    assert normalized(wrapped) == normalized(prompt + "\n")
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in [
        {"type": "user", "promptId": "a", "uuid": "1", "message": {"role": "user", "content": "typed"}},
        {"type": "user", "promptId": "b", "uuid": "2", "message": {"role": "user", "content": wrapped}}]))
    assert recent_prompts(path) == ["typed", prompt]
