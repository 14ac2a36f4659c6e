"""The one vocabulary a person reads a tile's state in — ``baton status`` (its table and ``--json``), the
live board, ``baton web`` and ``status --all-hosts`` all say it the same way (docs/board.md, "States"):
``idle``, ``working``, ``waiting``, ``absent``, ``gone``, each with the adapter's own words after it where
it has some (``waiting: permission prompt``, ``idle: draft typed``, ``absent: bare shell``).

The adapters answer in the engine's words (``ready``, ``busy``, ``draft``: whether a prompt may be typed)
or in their own (``waiting (permission prompt)``, ``working: 1 background agent``); this module turns either
into the person's words, and reads its own words back (a row said once is said the same way again)."""

from __future__ import annotations

import unicodedata

from pipeline.system.proc import SHELLS
from pipeline.system.text import strip_ansi

__all__ = ["KINDS", "clean", "state_text", "state_words"]

#: the states' kinds, the first word of every state a person reads
KINDS = ("idle", "working", "waiting", "absent", "gone")


def clean(text: str) -> str:
    """One line of printable text: escape sequences go, other control characters (tabs, newlines) become
    spaces."""
    return "".join(" " if unicodedata.category(ch) == "Cc" or ch in "\u2028\u2029" else ch
                   for ch in strip_ansi(text))


def state_words(state: str | None, pane_command: str = "") -> tuple[str, str]:
    """(kind, words) for a state, in the engine's words, an adapter's or this vocabulary's own. ``kind`` is
    one of :data:`KINDS` (what the clock and the colour follow); ``words`` is what follows it, "" when
    nothing does. ``pane_command``: what runs in a pane without its agent (``absent: runs vim``)."""
    if state is None or state == "gone":
        return "gone", ""
    kind, _, rest = state.partition(":")
    if kind in ("idle", "absent", "gone") and (rest or kind != "absent"):
        return kind, clean(rest).strip()
    if state in ("busy", "working"):
        return "working", ""
    if state.startswith("working"):
        return "working", clean(state.removeprefix("working").lstrip(": ")).strip()
    if state.startswith("waiting"):
        reason = clean(state.removeprefix("waiting")).strip(" :()")
        return "waiting", reason or "for a person"
    if state == "ready":
        return "idle", ""
    if state == "draft":
        return "idle", "draft typed"
    if state == "absent":
        command = clean(pane_command).strip()
        return "absent", "bare shell" if command in SHELLS or not command else f"runs {command}"
    return "idle", clean(state)


def state_text(state: str | None, pane_command: str = "") -> str:
    """The state as a person reads it: ``waiting: permission prompt``, ``idle``, ``absent: bare shell``."""
    kind, words = state_words(state, pane_command)
    return f"{kind}: {words}" if words else kind
