"""Making text safe: ANSI stripping for screens, and the sanitizer that guards every pane we type into;
how wide text is in a terminal, for the tables that must fit one; and counted nouns (``2 routes``).

Both work on ``str``. The sanitizer is the last step before tmux: whatever an agent printed, only printable
characters, newline and tab get through, so no escape sequence (and so no bracketed-paste terminator
``ESC[201~``) from one agent's output can act on another agent's terminal.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

__all__ = ["MAX_TEXT_BYTES", "count", "fit", "sanitize", "strip_ansi", "text_width"]

#: the most text batonpass types into a pane in one piece (``baton send``, the web page's Send, ``baton
#: preview --input``): far above any agent's answer, far below what would make tmux or a terminal stall
MAX_TEXT_BYTES = 8 * 1024 * 1024

# ESC-introduced sequences (ECMA-48): CSI, OSC/DCS/SOS/PM/APC strings, two-byte escapes; plus the 8-bit
# C1 forms of CSI (0x9b) and of the string introducers (0x90, 0x98, 0x9d, 0x9e, 0x9f).
_ANSI = re.compile(
    r"""
    (?:\x1b\[|\x9b) [\x30-\x3f]* [\x20-\x2f]* [\x40-\x7e]        # CSI ... final
  | (?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]) .*? (?:\x07|\x1b\\|\x9c|$)   # OSC/DCS/SOS/PM/APC ... ST|BEL
  | \x1bO [\x20-\x7e]                                            # SS3 (keypad, F1-F4)
  | \x1b [\x20-\x2f]* [\x30-\x7e]                                 # nF / Fp / Fe / Fs escapes
  | \x1b $                                                        # a lone ESC at the very end
    """,
    re.VERBOSE | re.DOTALL,
)
# C0 except tab and newline, DEL, C1; plus Unicode "format" characters that reorder or hide text.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def strip_ansi(text: str) -> str:
    """Remove terminal escape sequences and control characters; keep newlines and tabs.

    Carriage returns are treated as line ends (``\\r\\n`` → ``\\n``), and trailing spaces that a screen
    capture pads lines with are removed.
    """
    text = _ANSI.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROLS.sub("", text)
    return "\n".join(line.rstrip() for line in text.split("\n"))


def sanitize(text: str) -> str:
    """The text as it may be typed into a pane: printable characters, ``\\n`` and ``\\t`` only.

    Escape sequences are removed whole (not just their ESC byte, which would leave ``[201~`` behind to
    confuse a reader), other controls dropped, unpaired surrogates dropped, line ends normalised, and
    trailing blank lines trimmed so that the submit key is not preceded by empty lines.
    """
    text = _ANSI.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROLS.sub("", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cs")
    return text.strip("\n")


def _char_width(ch: str) -> int:
    if ch == "\u00ad":
        return 1  # a soft hyphen: a format character, yet terminals draw it
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def text_width(text: str) -> int:
    """Columns ``text`` takes in a terminal (a wide East Asian character takes two, a combining one none)."""
    return sum(_char_width(ch) for ch in text)


def fit(text: str, width: int, *, pad: bool = False, measure: Callable[[str], int] | None = None) -> str:
    """``text`` in at most ``width`` columns, cut with ``…`` where it was cut; padded with spaces to
    ``width`` when ``pad``. ``measure`` counts columns where :func:`text_width` is not the last word (it
    must count at least as much: the board takes the larger of rich's count and this one)."""
    measure = measure or text_width
    if width <= 0:
        return ""
    used = measure(text)
    if used > width:
        kept: list[str] = []
        used = 1  # the …
        for ch in text:
            if used + _char_width(ch) > width:
                break
            kept.append(ch)
            used += _char_width(ch)
        while kept and measure("".join(kept)) + 1 > width:  # counted as more than its characters (❤️)
            kept.pop()
        text = "".join(kept) + "…"
        used = measure(text)
    return text + " " * (width - used) if pad else text


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 route``, ``2 routes``, ``0 problems``."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
