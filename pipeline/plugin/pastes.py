"""How an agent's input line shows a paste that was not submitted yet: the text itself, or a placeholder.

After a crash between batonpass's paste and its Enter, the restarted daemon must tell its own paste from a
person's draft (docs/agent-versions.md, "Pasted drafts"). Every real agent draws a long paste as a short
placeholder (``[Pasted text #2 +8 lines]``); a short one is drawn as the text, wrapped and indented to fit
the input box. This module compares what the input line shows with the text that was pasted; the
placeholder rules are each adapter's (:meth:`pipeline.plugin.agents.AgentAdapter.shows_paste`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

__all__ = ["InputHolds", "MIN_PARTIAL", "box_holds", "collapsed", "line_count", "shows_text", "utf16_length"]

#: what an agent's input holds, compared with a prompt batonpass pasted there: that ``prompt`` (as text or
#: as the agent's placeholder for it), ``other`` text (a person's draft), or nothing (``empty``)
InputHolds = Literal["prompt", "other", "empty"]

#: a draft that shows only the end of a long paste (an input box scrolled to its end) must show at least
#: this many characters of it (whitespace ignored) to be taken for that paste, not for a person's words
MIN_PARTIAL = 40


def collapsed(text: str) -> str:
    """``text`` without any whitespace: an input box re-wraps, indents and trims lines, never the rest."""
    return "".join(text.split())


def line_count(text: str) -> int:
    """Lines of a pasted ``text`` (already sanitized: no trailing newline), as agents count them."""
    return text.count("\n") + 1 if text else 0


def utf16_length(text: str) -> int:
    """``text``'s length as JavaScript counts it (UTF-16 code units): the agents written in it measure a
    paste that way (an emoji counts two)."""
    return len(text.encode("utf-16-le")) // 2


def shows_text(draft: str, text: str) -> bool:
    """Whether the input line's ``draft`` is ``text`` drawn inline: the same characters once wrapping and
    indentation are ignored — all of it, or (an input box scrolled to the cursor, after the paste) its
    last :data:`MIN_PARTIAL` characters or more. Never a draft that is only the start of ``text``: hand-offs
    made from one template share their first lines."""
    shown, pasted = collapsed(draft), collapsed(text)
    if not shown or not pasted:
        return False
    return shown == pasted or (len(shown) >= MIN_PARTIAL and pasted.endswith(shown))


def box_holds(box: str | None, text: str, shows_paste: Callable[[str, str], bool]) -> InputHolds | None:
    """What an input ``box`` read off the screen holds, compared with the pasted ``text`` (judged by the
    adapter's ``shows_paste``); None when there is no box (the agent starting, a dialog)."""
    if box is None:
        return None
    if not box.strip():
        return "empty"
    return "prompt" if shows_paste(box.strip(), text) else "other"
