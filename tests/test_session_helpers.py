"""The pieces of ``pipeline.plugin`` that the session-file adapters (Gemini CLI, pi, Qwen Code) share, held to
what each adapter did on its own before: which sessions a process opened by time, a file read as it grows,
``baton extract``'s and ``baton resolve``'s words, and what an input box holds after a crash at the paste."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from pipeline.plugin.pastes import box_holds
from pipeline.plugin.session_answers import (
    answer_of,
    file_completion,
    last_finished,
    norm,
    read_whole,
    turn_step,
)
from pipeline.plugin.session_file import FollowedFile
from pipeline.plugin.started import by_start, session_files, started_since, written_since
from pipeline.plugin.turns import FileResolution, FileTurn
from plugins.gemini.session import SessionFile as GeminiFile
from plugins.pi.session import SessionFile as PiFile
from plugins.qwen.session import SessionFile as QwenFile


class Lines:
    def __init__(self) -> None:
        self.records: list[dict] = []

    def feed(self, record: dict) -> None:
        self.records.append(record)


def test_sessions_by_start_oldest_first_and_those_since_a_process_started(tmp_path: Path) -> None:
    name = re.compile(r"^s-\d\.jsonl$")
    starts = {"s-1.jsonl": 100.0, "s-2.jsonl": 300.0, "s-3.jsonl": 200.0, "s-4.jsonl": None}
    for i, (file, _) in enumerate(starts.items()):
        (tmp_path / file).write_text("{}\n")
        os.utime(tmp_path / file, (1000.0 - i, 1000.0 - i))  # written last: s-1
    (tmp_path / "other.txt").write_text("")
    files = session_files(tmp_path, name)
    assert [p.name for p in files] == ["s-4.jsonl", "s-3.jsonl", "s-2.jsonl", "s-1.jsonl"]
    start_of = starts.get
    assert [(s, p.name) for s, p in by_start(files, lambda p: start_of(p.name))] == [
        (100.0, "s-1.jsonl"), (200.0, "s-3.jsonl"), (300.0, "s-2.jsonl")]
    # a process started at 201 opened s-2 only; 2 s of clock slack lets s-3 (200) in for one at 202
    assert [p.name for _, p in started_since(files, 201.0 + 2.0, lambda p: start_of(p.name))] == ["s-2.jsonl"]
    assert [p.name for _, p in started_since(files, 202.0, lambda p: start_of(p.name))] == ["s-3.jsonl",
                                                                                             "s-2.jsonl"]
    assert [p.name for p in written_since(files, 999.5)] == ["s-3.jsonl", "s-2.jsonl", "s-1.jsonl"]
    assert session_files(tmp_path / "missing", name) == []


def test_a_followed_file_counts_the_records_of_its_state_and_starts_again_if_replaced(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n')
    file = FollowedFile(path, Lines)
    assert file.read() and file.fed == 2 and len(file.state.records) == 2
    assert not file.read() and file.fed == 2  # nothing new: a look at an unchanged file
    path.write_text('{"b": 1}\n')  # cut short: read again from its start, into a new state
    assert file.read() and file.fed == 1 and file.state.records == [{"b": 1}]


def test_pi_gemini_and_qwen_files_are_followed_files_and_their_turns_file_turns() -> None:
    for reader in (PiFile, GeminiFile, QwenFile):
        assert issubclass(reader, FollowedFile)
    from plugins.gemini.session import Turn as G
    from plugins.pi.session import Turn as P
    from plugins.qwen.session import Turn as Q
    assert all(issubclass(t, FileTurn) for t in (G, P, Q))


def test_extract_says_why_a_file_has_no_finished_turn_and_names_the_turn(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with pytest.raises(LookupError, match="no prompt was written to it"):
        last_finished(path, [])
    open_turn = FileTurn("pi:s:1", "hi", 10.0)
    with pytest.raises(LookupError, match="holds no finished turn: the last turn is still open"):
        last_finished(path, [open_turn])
    done = FileTurn("pi:s:0", "hello", 5.0, outcome="failed", detail="interrupted", ended_at=7.0)
    assert last_finished(path, [done, open_turn]) is done
    with pytest.raises(LookupError, match=r"the last turn \(pi:s:0\) ended interrupted; it left no answer"):
        answer_of(path, done)
    completion = file_completion(path, done)
    assert (completion.tile, completion.turn_id, completion.outcome, completion.signal, completion.at,
            completion.detail) == ("s.jsonl", "pi:s:0", "failed", "file", 7.0, "interrupted")
    with pytest.raises(OSError):
        read_whole(tmp_path / "missing.jsonl", PiFile)  # the caller's error, not "no turn"
    header = {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/x"}
    path.write_text(json.dumps(header))  # no newline: read to its end
    assert read_whole(path, PiFile).state.session_id == "s"


def test_resolve_names_the_running_turn_else_how_the_last_ended() -> None:
    done = FileTurn("q:s:0", "a", 1.0, outcome="completed", ended_at=2.0)
    failed = FileTurn("q:s:1", "b", 3.0, outcome="failed", detail="interrupted", ended_at=4.0)
    running = FileTurn("q:s:2", "c", 5.0)
    assert turn_step([], "s").detail == "idle, no finished turn"
    assert turn_step([done], "s").detail == "idle; last turn q:s:0 completed"
    assert turn_step([done, failed], "s").detail == "idle; last turn q:s:1 failed interrupted"
    step = turn_step([done, running], "s")
    assert (step.step, step.ok, step.detail, step.value) == ("turn", True, "busy: turn q:s:2",
                                                             {"session": "s", "busy": True})
    res = FileResolution()
    assert res.decide("hook", Path("/f.jsonl"), "a hook named it") is res and res.session == Path("/f.jsonl")
    assert [(s.step, s.detail) for s in res.steps] == [("hook", "decided: a hook named it"),
                                                       ("transcript", "/f.jsonl (rule: hook)")]


def test_an_input_box_holds_nothing_the_paste_or_a_draft() -> None:
    def shows(draft: str, text: str) -> bool:
        return draft == text or draft == "[paste #1 +14 lines]"
    assert box_holds(None, "x", shows) is None  # no box: starting, or a dialog
    assert box_holds("  ", "x", shows) == "empty"
    assert box_holds(" x ", "x", shows) == "prompt"
    assert box_holds("[paste #1 +14 lines]", "many lines", shows) == "prompt"
    assert box_holds("a person's words", "x", shows) == "other"
    assert norm(" two\n  words\t") == "two words"
