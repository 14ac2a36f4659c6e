"""Hostile and broken input never crashes a reader and never reaches a pane as control bytes.

Property tests (hypothesis) over arbitrary bytes, truncations, gigantic lines and invalid UTF-8 for the
Claude Code transcript reader, the Codex rollout reader, the generic JSONL tail, the ANSI stripper and
the sanitizer. The default profile runs quickly in CI; ``HYPOTHESIS_PROFILE=fuzz`` runs the long fuzz
(see tests/conftest.py).
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.system.jsonl import AppendedLines
from pipeline.system.text import sanitize, strip_ansi
from plugins.claude_code import reader as claude_transcript
from plugins.codex import reader as codex_rollout
from plugins.codex import turns as codex_turns
from tests.support.paths import FIXTURES

UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
CLAUDE_LINES = [ln for f in sorted((FIXTURES / "claude-code/home/.claude/projects").glob("*/*.jsonl"))
                for ln in f.read_bytes().splitlines(keepends=True)]
CODEX_LINES = [ln for f in sorted((FIXTURES / "codex").rglob("rollout-*.jsonl"))
               for ln in f.read_bytes().splitlines(keepends=True)]

NASTY = st.sampled_from(
    [
        b"\x1b[201~",
        b"\x1b]0;x\x07",
        b"\xff\xfe",
        b"\xc3",
        b"\x00",
        b"\r",
        b"\n",
        b"{",
        b"}",
        b'"',
        b"\\u0000",
        b"\\ud800",
        b"\x9b",
        b"\xe2\x9d",
        b" " * 70000,
    ]
)


def mutated(lines: list[bytes]) -> st.SearchStrategy[bytes]:
    """Real recorded lines, cut, spliced and salted with hostile bytes."""
    piece = st.one_of(
        st.sampled_from(lines),
        st.binary(max_size=200),
        NASTY,
        st.sampled_from(lines).flatmap(lambda ln: st.integers(0, len(ln)).map(lambda i: ln[:i])),
    )
    return st.lists(piece, max_size=40).map(b"".join)


def hostile_text_line(kind: str) -> st.SearchStrategy[bytes]:
    """A well-formed JSON line whose text fields carry escape sequences and controls."""
    evil = st.lists(
        st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
        | st.sampled_from(["\x1b[201~", "\x1b]52;c;x\x07", "\x00", "\x9b", "\u202e"]),
        max_size=8,
    ).map("".join)
    if kind == "claude":
        return evil.map(
            lambda t: (
                json.dumps(
                    {
                        "type": "assistant",
                        "uuid": "u",
                        "message": {
                            "id": "m",
                            "role": "assistant",
                            "stop_reason": "end_turn",
                            "content": [{"type": "text", "text": t}],
                        },
                    }
                ).encode()
                + b"\n"
            )
        )
    return evil.map(
        lambda t: (
            json.dumps(
                {
                    "type": "event_msg",
                    "payload": {"type": "task_complete", "turn_id": "t", "last_agent_message": t},
                }
            ).encode()
            + b"\n"
        )
    )


def write(data: bytes) -> Path:
    f = tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False)
    f.write(data)
    f.close()
    return Path(f.name)


def feed_in_chunks(reader_read, path: Path, data: bytes, cut: int) -> None:
    """Write ``data`` in two parts, reading after each: a half-written line must wait, not crash."""
    path.write_bytes(data[:cut])
    reader_read()
    with path.open("ab") as f:
        f.write(data[cut:])
    reader_read()


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated(CLAUDE_LINES) | st.binary(), st.integers(min_value=0))
def test_claude_transcript_reader_never_crashes(data: bytes, cut: int) -> None:
    path = write(b"")
    try:
        tail = claude_transcript.TranscriptTail(path, from_start=True)
        feed_in_chunks(tail.read_new, path, data, cut % (len(data) + 1))
        end = claude_transcript.last_finished_turn(path)
        if end is not None:
            assert isinstance(end.text, str)
            assert not UNSAFE.search(sanitize(end.text))
    finally:
        path.unlink()


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(hostile_text_line("claude"), min_size=1, max_size=5).map(b"".join))
def test_claude_answers_with_escapes_are_sanitized(data: bytes) -> None:
    path = write(data)
    try:
        end = claude_transcript.last_finished_turn(path)
        if end is not None:
            assert "\x1b" not in sanitize(end.text) and not UNSAFE.search(sanitize(end.text))
    finally:
        path.unlink()


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated(CODEX_LINES) | st.lists(hostile_text_line("codex"), max_size=4).map(b"".join) | st.binary(),
       st.integers(min_value=0))
def test_codex_rollout_reader_never_crashes(data: bytes, cut: int) -> None:
    path = write(b"")
    try:
        tail, state = codex_rollout.JsonlTail(path), codex_turns.RolloutState()

        def read() -> None:
            for record in tail.read():
                state.feed(record)

        feed_in_chunks(read, path, data, cut % (len(data) + 1))
        for record in tail.read(final=True):
            state.feed(record)
        turn = state.last_finished()
        if turn is not None and turn.answer is not None:
            assert not UNSAFE.search(sanitize(turn.answer))
    finally:
        path.unlink()


@given(st.binary(), st.integers(min_value=0))
def test_jsonl_tail_never_crashes(data: bytes, cut: int) -> None:
    path = write(b"")
    try:
        tail = AppendedLines(path)
        feed_in_chunks(tail.read, path, data, cut % (len(data) + 1))
    finally:
        path.unlink()


def test_gigantic_line_is_read_whole(tmp_path: Path) -> None:
    """No line-length limit: a 12 MB line (as after /compact) is one record, and arrives whole."""
    big = "x" * (12 * 1024 * 1024)
    path = tmp_path / "big.jsonl"
    tail = AppendedLines(path)
    line = json.dumps({"type": "answer", "text": big}).encode()
    path.write_bytes(line[: len(line) // 2])
    assert tail.read() == []
    with path.open("ab") as f:
        f.write(line[len(line) // 2:] + b"\n")
    (record,) = tail.read()
    assert len(record["text"]) == len(big)


@given(st.binary(max_size=4000))
def test_ansi_stripper_and_sanitizer_on_invalid_utf8(data: bytes) -> None:
    text = data.decode("utf-8", "surrogateescape")
    assert not UNSAFE.search(strip_ansi(data.decode("utf-8", "replace")))
    out = sanitize(text)
    assert not UNSAFE.search(out) and "\x1b" not in out
    out.encode("utf-8")  # no lone surrogates reach tmux
