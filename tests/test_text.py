"""The ANSI stripper and the sanitizer, on the recorded screens and on hostile input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.system.text import sanitize, strip_ansi
from tests.support.paths import FIXTURES

SCREENS = (
    sorted((FIXTURES / "claude-code" / "screens").glob("*.txt"))
    + sorted((FIXTURES / "codex" / "screens").glob("*.txt"))
    + sorted((FIXTURES / "opencode" / "screens").glob("*.txt"))
)
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.mark.parametrize("screen", SCREENS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_recorded_screen_strips_clean(screen: Path) -> None:
    raw = screen.read_text(encoding="utf-8")
    clean = strip_ansi(raw)
    assert not UNSAFE.search(clean), "a control character survived"
    assert "[38;5" not in clean and "[39m" not in clean and "[0m" not in clean
    # the visible text is all still there, in order
    visible = re.sub(r"\x1b\[[0-9;?]*[ -/]*[@-~]", "", raw)
    assert [ln.rstrip() for ln in visible.split("\n")] == clean.split("\n")


def test_claude_done_screen_reads_as_text() -> None:
    clean = strip_ansi((FIXTURES / "claude-code/screens/screen_done.txt").read_text())
    assert "● I refactored the auth middleware to validate tokens before routing." in clean
    assert "  - src/auth/middleware.py" in clean
    assert "  print('hi')" in clean
    assert "✻ Brewed for 10s" in clean
    assert "? for shortcuts" in clean


def test_claude_working_screen_shows_spinner_text() -> None:
    clean = strip_ansi((FIXTURES / "claude-code/screens/screen_working.txt").read_text())
    assert "esc to interrupt" in clean


@pytest.mark.parametrize("raw, expected", [
    ("plain text", "plain text"),
    ("\x1b[31mred\x1b[0m", "red"),
    ("a\x1b[201~b", "ab"),                      # the bracketed-paste terminator never reaches a pane
    ("a\x1b[200~b\x1b[201~c", "abc"),
    ("title\x1b]0;evil\x07 after", "title after"),  # OSC with BEL
    ("osc\x1b]52;c;ZXZpbA==\x1b\\ end", "osc end"),  # OSC 52 clipboard write with ST
    ("dcs\x1bPq#0;2;0;0;0\x1b\\ end", "dcs end"),
    ("c1\x9b201~csi", "c1csi"),               # 8-bit CSI
    ("bell\x07 nul\x00 bs\x08 del\x7f", "bell nul bs del"),
    ("tab\tnew\nline", "tab\tnew\nline"),
    ("crlf\r\nline\rend", "crlf\nline\nend"),
    ("\x1b7save\x1b8", "save"),
    ("\x1b(Bcharset", "charset"),
    ("keys\x1bOA\x1b[A", "keys"),
    ("\n\nframed\n\n\n", "framed"),
    ("unicode ✻ ❯ → ok", "unicode ✻ ❯ → ok"),
    ("bidi\u202eevil\u202c", "bidievil"),
    ("lone esc\x1b", "lone esc"),
])
def test_sanitize(raw: str, expected: str) -> None:
    assert sanitize(raw) == expected


PIECES = st.sampled_from(
    ["\x1b", "[", "]", "201~", "200~", "\x9b", "\x07", "\x1b\\", "\r", "\n", "P", "\x00"]
)


@given(st.lists(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",))) | PIECES).map("".join))
def test_sanitize_never_lets_control_bytes_through(raw: str) -> None:
    out = sanitize(raw)
    assert not UNSAFE.search(out)
    assert "\x1b" not in out
    assert "\x1b[201~" not in out
    assert sanitize(out) == out  # idempotent


@given(st.binary())
def test_strip_ansi_on_arbitrary_bytes(raw: bytes) -> None:
    out = strip_ansi(raw.decode("utf-8", "replace"))
    assert not UNSAFE.search(out)
