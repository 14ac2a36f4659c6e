"""The Claude Code transcript reader, on every recorded transcript and on generated edge cases."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pipeline import cli
from plugins.claude_code.adapter import ClaudeCodeAdapter
from plugins.claude_code.reader import (
    TranscriptTail,
    find_turn,
    last_finished_turn,
    latest_turn,
    scan_back,
)
from tests.support.claude import Transcript, text
from tests.support.paths import FIXTURES

CC = FIXTURES / "claude-code"
PROJECT = CC / "home" / ".claude" / "projects" / "-home-dev-my-app"
MAIN = PROJECT / "842bf2f0-133b-4c4f-9737-29f5b0a34edd.jsonl"
SCRIPTED = (
    "I refactored the auth middleware to validate tokens before routing.\n\n```python\nprint('hi')\n```\n\n"
    "Files changed:\n- src/auth/middleware.py\n- src/auth/tokens.py\n- tests/test_auth.py\n"
)
AFTER_TOOL = (
    "The command printed `hello`. Everything works.\n\n```bash\necho hello\n```\n\nFiles changed:\n- (none)\n"
)


def stop_hooks() -> list[dict]:
    records = [json.loads(line) for line in (CC / "hooks" / "hooks.jsonl").read_text().splitlines()]
    return [r["stdin"] for r in records if r["hook_arg"] == "Stop"]


# ---- the recorded transcripts ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected", "prompt_id"),
    [
        (
            "842bf2f0-133b-4c4f-9737-29f5b0a34edd",
            SCRIPTED,
            "2bdc70c1-a16a-4eda-93d8-54222ca14a8d",
        ),  # then interrupt, /exit
        (
            "c0d39d8d-0b5c-4f22-bd5d-1f224d362452",
            SCRIPTED,
            "77105421-7292-4450-8fe3-9bf86fea6bf4",
        ),  # after --resume
        (
            "eeae8abd-2a59-4a25-a072-7d0a5aa64888",
            AFTER_TOOL,
            "c6a7fc82-a032-4518-aae9-7676f442e551",
        ),  # subagent turn
    ],
)
def test_extract_gives_the_exact_last_answer_of_every_recorded_transcript(
    name: str, expected: str, prompt_id: str
) -> None:
    response = ClaudeCodeAdapter.extract_file(PROJECT / f"{name}.jsonl")
    assert response is not None and response.text == expected
    assert response.completion.turn_id == f"claude:{name}:{prompt_id}"
    assert response.cwd == "/home/dev/my-app" and response.source == "transcript"


@pytest.mark.parametrize("path", [PROJECT / "69a8991c-ee49-4414-a7b1-ecde10f87e7f.jsonl",
                                  *PROJECT.glob("*/subagents/agent-*.jsonl")], ids=lambda p: p.name)
def test_no_finished_turn_in_an_unused_session_or_a_subagent_file(path: Path) -> None:
    why = "no main-chain turn: only subagent" if path.name.startswith("agent-") else "no prompt was written"
    with pytest.raises(LookupError, match=why):
        ClaudeCodeAdapter.extract_file(path)


def test_every_recorded_stop_hook_names_a_turn_whose_transcript_answer_is_its_text() -> None:
    """The hook's (session_id, prompt_id) finds the turn in the transcript, and its answer is the text
    the hook carried (Claude Code trims it): the two signals agree on turn and answer."""
    hooks = stop_hooks()
    assert len(hooks) >= 8
    for hook in hooks:
        path = PROJECT / f"{hook['session_id']}.jsonl"
        end, started = find_turn(path, hook["prompt_id"])
        assert started and end is not None and end.outcome == "completed", hook["prompt_id"]
        assert end.text.strip() == hook["last_assistant_message"]
        assert end.turn_id == f"claude:{hook['session_id']}:{hook['prompt_id']}"


def test_interrupted_turn_is_failed_with_its_partial_text() -> None:
    end, started = find_turn(MAIN, "19be03e5-eb22-413f-8570-682f949e2737")
    assert started and end is not None
    assert end.outcome == "failed" and end.reason == "interrupted"
    assert end.text == "I refactored the auth middleware to validate tokens before routing.\n\n```"


def test_tool_turn_answer_is_the_final_message_not_the_preamble() -> None:
    end, _ = find_turn(MAIN, "96c905e6-551e-432d-a617-7c3cd2a5ab69")
    assert end is not None and end.text == AFTER_TOOL


def test_baton_extract_prints_it_exactly_and_fails_clearly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "extract", str(MAIN)], capture_output=True, text=True
    )
    assert ok.returncode == 0 and ok.stdout == SCRIPTED
    assert cli.main(["extract", str(MAIN), "--json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert as_json["text"] == SCRIPTED and as_json["outcome"] == "completed"
    assert cli.main(["extract", str(PROJECT / "69a8991c-ee49-4414-a7b1-ecde10f87e7f.jsonl")]) == 1
    assert "holds no turn: no prompt was written to it" in capsys.readouterr().err
    assert cli.main(["extract", str(tmp_path / "nope.jsonl")]) == 1
    assert "nope.jsonl" in capsys.readouterr().err


# ---- generated transcripts ---------------------------------------------------------------------------


@pytest.fixture
def tx(tmp_path: Path) -> Transcript:
    return Transcript(tmp_path / f"{uuid.uuid4()}.jsonl")


def test_split_blocks_of_one_message_are_joined_and_tool_blocks_skipped(tx: Transcript) -> None:
    tx.prompt("do it")
    tx.assistant(
        "msg_a",
        text("Let me look."),
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}},
        stop="tool_use",
    )
    tx.write(tx.line({"type": "user", "promptId": "x", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}}))
    tx.assistant(
        "msg_b", {"type": "thinking", "thinking": "hmm"}, text("Part one."), text("Part two — ünïcødé ✓ 日本")
    )
    tx.end()
    assert last_finished_turn(tx.path).text == "Part one.\nPart two — ünïcødé ✓ 日本"


def test_a_tool_turn_in_progress_is_not_finished(tx: Transcript) -> None:
    tx.turn("first", "first answer")
    tx.prompt("second")
    tx.assistant(
        "msg_c",
        text("Running a command."),
        {"type": "tool_use", "id": "t", "name": "Bash", "input": {}},
        stop="tool_use",
    )
    assert latest_turn(tx.path).state == "running"
    assert last_finished_turn(tx.path).text == "first answer"


def test_sidechain_meta_compact_and_unknown_lines_are_skipped(tx: Transcript) -> None:
    key = tx.prompt("main prompt")
    tx.write(tx.line({"type": "assistant", "isSidechain": True, "message": {
        "id": "side", "stop_reason": "end_turn", "content": [text("subagent text")]}}))
    tx.write(
        {"type": "progress", "data": {"x": 1}},
        {"type": "pr-link", "url": "u"},
        {"type": "brand-new-type"},
        tx.line({"type": "system", "subtype": "compact_boundary"}),
        tx.line(
            {
                "type": "user",
                "isCompactSummary": True,
                "message": {"role": "user", "content": "summary " * 50},
            }
        ),
        tx.line(
            {"type": "user", "isMeta": True, "message": {"role": "user", "content": "<system-reminder>"}}
        ),
    )
    tx.assistant("msg_main", text("main answer"))
    tx.end()
    end = last_finished_turn(tx.path)
    assert end.text == "main answer" and end.key == key


def test_interrupt_and_api_error_are_failed_turns(tx: Transcript) -> None:
    tx.turn("ok", "good answer")
    tx.prompt("slow")
    tx.assistant(str(uuid.uuid4()), text("partial"), stop="stop_sequence", model="<synthetic>")
    tx.write(tx.line({"type": "user", "promptId": "p", "message": {"role": "user", "content": [
        text("[Request interrupted by user]")]}}))
    key = tx.prompt("broken")
    tx.assistant(
        str(uuid.uuid4()),
        text("API Error: 500 overloaded"),
        stop="stop_sequence",
        model="<synthetic>",
        isApiErrorMessage=True,
    )
    tx.end(hooks=False)
    end, _ = find_turn(tx.path, key)
    assert end.outcome == "failed" and end.reason == "api_error"
    assert last_finished_turn(tx.path).text == "good answer"


def test_a_turn_without_turn_duration_line_ends_with_its_end_turn_message(tx: Transcript) -> None:
    tx.prompt("old version")
    tx.assistant("m1", text("answer without turn_duration"))
    assert latest_turn(tx.path).state == "answered"
    assert last_finished_turn(tx.path).reason == "end_turn"
    tx.prompt("next")
    assert last_finished_turn(tx.path).text == "answer without turn_duration"


def test_a_half_written_last_line_is_left_for_later(tx: Transcript) -> None:
    tx.turn("one", "answer one")
    key = tx.prompt("two")
    tx.assistant("m2", text("answer two"))
    end_line = json.dumps(tx.line({"type": "system", "subtype": "turn_duration"})).encode()
    with tx.path.open("ab") as f:
        f.write(end_line[:25])
    assert last_finished_turn(tx.path).text == "answer two"  # the end_turn message, turn_duration pending
    assert latest_turn(tx.path).state == "answered" and latest_turn(tx.path).key == key
    with tx.path.open("ab") as f:
        f.write(end_line[25:] + b"\n")
    assert last_finished_turn(tx.path).reason == "turn_duration"


def test_lines_written_out_of_order_are_read_in_causal_order(tx: Transcript) -> None:
    """2.1.197, seen: a transcript created after its title was generated starts with the answer line
    before its prompt line (all written at once)."""
    prompt = tx.line({"type": "user", "promptId": "k1", "message": {"role": "user", "content": "hi"}})
    attachment = tx.line({"type": "attachment"})
    answer = tx.line(
        {"type": "assistant", "message": {"id": "m", "stop_reason": "end_turn", "content": [text("hello")]}}
    )
    summary, duration = (
        tx.line({"type": "system", "subtype": "stop_hook_summary"}),
        tx.line({"type": "system", "subtype": "turn_duration"}),
    )
    tx.write({"type": "ai-title", "aiTitle": "t"}, answer, prompt, attachment, summary, duration)
    end = last_finished_turn(tx.path)
    assert end.text == "hello" and end.key == "k1"


def test_a_multi_megabyte_line_and_lines_longer_than_the_window(tx: Transcript) -> None:
    tx.turn("before", "before answer")
    huge = "x" * (5 * 1024 * 1024)
    tx.write(
        tx.line({"type": "user", "isCompactSummary": True, "message": {"role": "user", "content": huge}})
    )
    tx.prompt("after compact")
    tx.assistant("m", text("ok " + "y" * (600 * 1024)))
    tx.end()
    end = last_finished_turn(tx.path)
    assert end.text.startswith("ok y") and len(end.text) == 3 + 600 * 1024


def test_a_100_mb_transcript_is_read_from_its_end_only(tmp_path: Path) -> None:
    tx = Transcript(tmp_path / f"{uuid.uuid4()}.jsonl")
    for i in range(20):
        tx.turn(f"prompt {i}", f"answer {i} " + "lorem ipsum " * 200)
    block = tx.path.read_bytes()
    with tx.path.open("ab") as f:
        while f.tell() < 100 * 1024 * 1024:
            f.write(block)
    tx.turn("the last prompt", "the last answer ✓")
    assert tx.path.stat().st_size > 100 * 1024 * 1024
    scan = scan_back(tx.path, lambda s: any(e.whole for e in s.ends))
    assert scan.window <= 512 * 1024 and not scan.from_start
    assert last_finished_turn(tx.path).text == "the last answer ✓"


# ---- following a transcript --------------------------------------------------------------------------


def test_tail_reads_only_appended_bytes_and_waits_for_the_newline(tx: Transcript) -> None:
    tx.turn("history", "old answer")
    tail = TranscriptTail(tx.path)
    assert (
        tail.prime()
        and tail.offset == tx.path.stat().st_size
        and [e.text for e in tail.history] == ["old answer"]
    )
    assert tail.read_new() == []
    key = tx.prompt("new")
    tx.assistant("m", text("new answer"))
    line = json.dumps(tx.line({"type": "system", "subtype": "turn_duration"})).encode() + b"\n"
    with tx.path.open("ab") as f:
        f.write(line[:10])
    assert tail.read_new() == []
    with tx.path.open("ab") as f:
        f.write(line[10:])
    [end] = tail.read_new()
    assert end.key == key and end.text == "new answer" and end.outcome == "completed"
    assert tail.offset == tx.path.stat().st_size


def test_tail_of_a_file_created_later_reads_it_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / f"{uuid.uuid4()}.jsonl"
    tail = TranscriptTail(path)
    assert not tail.prime() and tail.read_new() == []
    tx = Transcript(path)
    tx.turn("first", "first answer")
    assert [e.text for e in tail.read_new()] == ["first answer"]


def test_tail_of_a_replaced_file_starts_again_at_its_end(tx: Transcript) -> None:
    tx.turn("one", "one")
    tail = TranscriptTail(tx.path)
    tail.prime()
    replacement = tx.path.with_suffix(".new")
    shutil.copy(tx.path, replacement)
    replacement.replace(tx.path)
    assert tail.read_new() == []  # replaced: primed again, history not reported
    tx.turn("two", "two")
    assert [e.text for e in tail.read_new()] == ["two"]
