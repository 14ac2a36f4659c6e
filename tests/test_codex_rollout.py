"""The Codex rollout reader on every recorded rollout, and on the edge cases the recordings lack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli import main as baton
from plugins.codex.adapter import CodexAdapter
from plugins.codex.reader import JsonlTail, parse_timestamp, thread_id_of, uuid7_time
from plugins.codex.turns import RolloutState
from tests.support.paths import FIXTURES

CODEX = FIXTURES / "codex"
ROLLOUTS = sorted((CODEX / "codex_home" / "sessions").glob("*/*/*/rollout-*.jsonl"))
FAILED = sorted((CODEX / "failed-turns").glob("*.jsonl"))


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def expected_turns(path: Path) -> list[tuple[str, str, str | None]]:
    """(turn id, outcome, answer) straight from the file's end-of-turn lines, for comparison."""
    out = []
    for r in lines(path):
        p = r.get("payload") or {}
        if r["type"] == "event_msg" and p.get("type") == "task_complete":
            out.append(
                (p["turn_id"], "failed" if p.get("error") else "completed", p.get("last_agent_message"))
            )
        elif r["type"] == "event_msg" and p.get("type") == "turn_aborted":
            out.append((p["turn_id"], "failed", None))
    return out


def fold(path: Path) -> RolloutState:
    state = RolloutState(thread_id=thread_id_of(path))
    for record in JsonlTail(path).read():
        state.feed(record)
    return state


def test_the_fixtures_are_there() -> None:
    assert len(ROLLOUTS) == 9 and len(FAILED) == 4


@pytest.mark.parametrize("path", ROLLOUTS + FAILED, ids=lambda p: p.name[-24:])
def test_every_recorded_turn_is_found_with_its_outcome_and_answer(path: Path) -> None:
    state = fold(path)
    finished = state.take_finished()
    assert [(t.turn_id, t.outcome, t.final_answer) for t in finished] == expected_turns(path)
    assert not state.busy
    meta = lines(path)[0]["payload"]
    assert (state.thread_id, state.cwd, state.originator) == (meta["id"], "/home/dev/api", meta["originator"])
    for turn in finished:
        if turn.outcome == "completed":
            assert turn.answer == turn.final_answer and turn.answer  # the clean answer, exactly
        assert turn.prompt  # the UserMessage that opened it


def test_tui_rollout_text_slow_interrupted_and_tool_turns() -> None:
    state = fold(next(p for p in ROLLOUTS if "01a236f2-8213" in p.name))
    outcomes = [(t.outcome, t.error, (t.answer or "")[:16]) for t in state.take_finished()]
    assert outcomes == [("completed", None, "FAKE_ANSWER_BEGI"), ("completed", None, "SLOW_BEGIN word0"),
                        ("failed", "interrupted", ""), ("completed", None, "FAKE_TOOL_FINAL ")]
    assert state.turn_starts == 4


def test_failed_turns_carry_the_error() -> None:
    for path in FAILED:
        failed = [t for t in fold(path).take_finished() if t.outcome == "failed"]
        assert failed and all(t.error and t.final_answer is None for t in failed), path.name


def test_a_late_item_completed_after_task_complete_is_not_a_new_turn() -> None:
    path = CODEX / "failed-turns" / "rollout-tui-with-error-turn.jsonl"
    records = lines(path)
    late = next(i for i, r in enumerate(records) if r["ordinal"] == 75)
    assert (
        records[late]["payload"]["type"] == "item_completed"
    )  # the SLEEPCMD command, after its task_complete
    state = RolloutState()
    for r in records[: late + 1]:
        state.feed(r)
    assert not state.busy
    assert len(state.take_finished()) == 5
    assert state.turn_starts == 5


def test_a_half_written_line_waits_for_its_newline(tmp_path: Path) -> None:
    source = ROLLOUTS[0].read_bytes()
    path = tmp_path / ROLLOUTS[0].name
    tail = JsonlTail(path)
    assert tail.read() == []  # not there yet: nothing, no error
    state = RolloutState()
    cut = source.index(b'"task_complete"') + 10
    path.write_bytes(source[:cut])
    for r in tail.read():
        state.feed(r)
    assert state.busy and state.take_finished() == []
    with open(path, "ab") as f:
        f.write(source[cut:])
    for r in tail.read():
        state.feed(r)
    assert [t.outcome for t in state.take_finished()] == ["completed"]
    assert tail.bad_lines == 0 and tail.offset == len(source)


def test_only_appended_bytes_are_read(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"type":"x"}\n')
    tail = JsonlTail(path)
    assert len(tail.read()) == 1
    with open(path, "a") as f:
        f.write('{"type":"y"}\n')
    assert [r["type"] for r in tail.read()] == ["y"]
    assert tail.read() == []
    path.write_text('{"type":"z"}\n')  # replaced (shorter): read from the start again
    assert [r["type"] for r in tail.read()] == ["z"]


def test_unknown_and_broken_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    records = lines(ROLLOUTS[0])
    body = [
        json.dumps(records[0]),
        "not json at all",
        json.dumps({"type": "future_thing", "payload": {"x": 1}}),
        json.dumps({"type": "event_msg", "payload": {"type": "brand_new_event", "turn_id": "t"}}),
        json.dumps([1, 2, 3]),
        json.dumps({"type": "event_msg", "payload": "a string"}),
        json.dumps({"type": "compacted", "payload": {"message": "summary"}}),
    ]
    body += [json.dumps(r) for r in records[1:]]
    path.write_text("\n".join(body) + "\n")
    tail = JsonlTail(path)
    state = RolloutState()
    for r in tail.read():
        state.feed(r)
    assert tail.bad_lines == 1
    assert [(t.turn_id, t.outcome) for t in state.take_finished()] == [
        (t, o) for t, o, _ in expected_turns(ROLLOUTS[0])
    ]


def test_the_older_event_shape(tmp_path: Path) -> None:
    """Older Codex: user_message / agent_message events, task_complete without ids, error events."""
    ev = [
        {
            "timestamp": "2025-08-01T10:00:00.000Z",
            "type": "session_meta",
            "payload": {
                "id": "th-old",
                "timestamp": "2025-08-01T10:00:00.000Z",
                "cwd": "/w",
                "originator": "codex_cli_rs",
            },
        },
        {
            "timestamp": "2025-08-01T10:00:01.000Z",
            "type": "event_msg",
            "payload": {"type": "user_message", "message": "hi"},
        },
        {
            "timestamp": "2025-08-01T10:00:02.000Z",
            "type": "event_msg",
            "payload": {"type": "agent_reasoning", "text": "hm"},
        },
        {
            "timestamp": "2025-08-01T10:00:03.000Z",
            "type": "event_msg",
            "payload": {"type": "agent_message", "message": "Hello."},
        },
        {
            "timestamp": "2025-08-01T10:00:03.100Z",
            "type": "event_msg",
            "payload": {"type": "task_complete", "last_agent_message": "Hello."},
        },
        {
            "timestamp": "2025-08-01T10:01:00.000Z",
            "type": "event_msg",
            "payload": {"type": "user_message", "message": "again"},
        },
        {
            "timestamp": "2025-08-01T10:01:01.000Z",
            "type": "event_msg",
            "payload": {"type": "agent_message", "message": "Part"},
        },
        {
            "timestamp": "2025-08-01T10:01:02.000Z",
            "type": "event_msg",
            "payload": {"type": "error", "message": "stream died"},
        },
        {
            "timestamp": "2025-08-01T10:02:00.000Z",
            "type": "event_msg",
            "payload": {"type": "user_message", "message": "third"},
        },
        {
            "timestamp": "2025-08-01T10:02:01.000Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "From the item"}],
            },
        },
        {"timestamp": "2025-08-01T10:02:02.000Z", "type": "event_msg", "payload": {"type": "task_complete"}},
    ]
    path = tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in ev))
    state = fold(path)
    turns = state.take_finished()
    assert [(t.outcome, t.answer, t.error, t.prompt) for t in turns] == [
        ("completed", "Hello.", None, "hi"), ("failed", "Part", "stream died", "again"),
        ("completed", "From the item", None, "third")]
    assert len({t.turn_id for t in turns}) == 3 and all(t.turn_id.startswith("th-old:") for t in turns)
    again = fold(path).take_finished()
    assert [t.turn_id for t in again] == [t.turn_id for t in turns]  # stable across reads


def test_busy_while_a_turn_runs() -> None:
    state = RolloutState()
    records = lines(next(p for p in ROLLOUTS if "01a236f2-8213" in p.name))
    for r in records:
        state.feed(r)
        p = r.get("payload") or {}
        if p.get("type") == "task_started":
            assert state.busy
        if p.get("type") in ("task_complete", "turn_aborted"):
            assert not state.busy


def test_times_and_ids_from_names() -> None:
    path = ROLLOUTS[1]
    tid = thread_id_of(path)
    assert tid == "01a236f2-8213-7d41-a995-69d74a850cf0"
    meta = lines(path)[0]["payload"]
    assert abs(uuid7_time(tid) - parse_timestamp(meta["timestamp"])) < 0.1  # the thread's start, in UTC
    assert uuid7_time("c0d39d8d-0000-4000-8000-000000000000") is None  # a v4 UUID carries no time
    assert thread_id_of("/x/notes.jsonl") is None and parse_timestamp("yesterday") is None


# ---- baton extract --agent codex ---------------------------------------------------------------------


@pytest.mark.parametrize("path", ROLLOUTS + FAILED, ids=lambda p: p.name[-24:])
def test_extract_file_gives_the_last_finished_turn(path: Path) -> None:
    last = expected_turns(path)[-1]
    if last[2] is None:
        with pytest.raises(LookupError, match="left no answer"):
            CodexAdapter.extract_file(path)
        return
    response = CodexAdapter.extract_file(path)
    assert (response.completion.turn_id, response.completion.outcome, response.text) == last
    assert response.source == "transcript" and response.cwd == "/home/dev/api"


def test_baton_extract_prints_the_answer_exactly(capsys: pytest.CaptureFixture[str]) -> None:
    path = next(p for p in ROLLOUTS if "01a236f2-8213" in p.name)
    assert baton(["extract", "--agent", "codex", str(path)]) == 0
    assert capsys.readouterr().out == expected_turns(path)[-1][2] + "\n"
    assert baton(["extract", "--agent", "codex", "--json", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["turn_id"] == "01a236f3-e6bd-7483-a511-0772d9de0559" and out["source"] == "transcript"


def test_baton_extract_says_why_when_there_is_no_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    interrupted = next(p for p in ROLLOUTS if "01a236f5-bc20" in p.name)
    assert baton(["extract", "--agent", "codex", str(interrupted)]) == 1
    assert "failed: interrupted; it left no answer" in capsys.readouterr().err
    empty = tmp_path / "rollout-empty.jsonl"
    empty.write_text(ROLLOUTS[0].read_text().splitlines()[0] + "\n")
    assert baton(["extract", "--agent", "codex", str(empty)]) == 1
    assert "holds no turn: no prompt was written to it" in capsys.readouterr().err
    assert baton(["extract", "--agent", "codex", str(tmp_path / "missing.jsonl")]) == 1
    assert "no such file" in capsys.readouterr().err
