"""An agent's permission prompt: what it asks, in the words it draws (:func:`asked`, for
:meth:`pipeline.plugin.screen.ScreenDialogs.asks`), and the keys that move a menu's selection to a choice and
take it (:meth:`pipeline.plugin.agents.AgentAdapter.answer_keys`). Every agent draws its own menu; what they
share is a list of choices with one selected, moved by arrow keys and taken by Enter."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from pipeline.system.text import sanitize

__all__ = ["ASKED_CHARS", "asked", "menu_keys", "numbered_choices", "pick", "unboxed"]

#: the most characters of one line of :func:`asked` (a long command is cut, with ``…``)
ASKED_CHARS = 200
_BORDERS = "│┃ "

#: a numbered choice in a box (``│ ● 1. Allow once │``, ``❯ 1. Yes``), its selection mark, number and label
_NUMBERED = re.compile(r"^[│┃\s]*(?:([●❯›>])\s*)?\d+\.\s+(.+?)[\s│┃]*$")


def unboxed(line: str) -> str:
    """A screen line without the box borders around it (``│ … │``, ``┃ …``) and its margins."""
    return line.strip().strip(_BORDERS).strip()


def asked(question: str | None, what: str | None = None) -> str | None:
    """What a dialog asks, as the person reads it: ``question`` (``Do you want to proceed?``) and, on a
    second line, ``what`` it asks about (``Bash command: touch marker.txt``) — each made one line of
    printable text (escapes and control characters removed, tabs and line ends made spaces), cut to
    :data:`ASKED_CHARS`; None when both are empty."""
    lines = [_one_line(part) for part in (question, what) if part]
    return "\n".join(line for line in lines if line) or None


def _one_line(text: str) -> str:
    line = sanitize(text).replace("\n", " ").replace("\t", " ").strip()
    return line if len(line) <= ASKED_CHARS else line[: ASKED_CHARS - 1] + "…"


def numbered_choices(lines: Sequence[str]) -> tuple[list[str], int]:
    """The labels of the numbered choices in ``lines`` (escapes stripped; the lines under a dialog's
    question), and the index of the one drawn with a selection mark (``●``, ``❯``, ``›``; 0 when none is)."""
    labels: list[str] = []
    selected = 0
    for line in lines:
        m = _NUMBERED.match(line)
        if m is None:
            continue
        if m.group(1):
            selected = len(labels)
        labels.append(m.group(2))
    return labels, selected


def pick(labels: Sequence[str], *wants: Callable[[str], bool]) -> int | None:
    """The index of the first label the first of ``wants`` that any label satisfies accepts, or None:
    ``pick(labels, lambda s: s == "Yes", lambda s: s.startswith("Yes"))`` prefers a plain "Yes"."""
    for want in wants:
        found = next((i for i, label in enumerate(labels) if want(label)), None)
        if found is not None:
            return found
    return None


def menu_keys(selected: int, wanted: int, *, across: bool = False) -> list[str]:
    """tmux key names that move a menu's selection from ``selected`` to ``wanted`` and take it (Enter):
    Up/Down for a list, Left/Right for a row of buttons (``across``)."""
    back, forth = ("Left", "Right") if across else ("Up", "Down")
    step = forth if wanted > selected else back
    return [step] * abs(wanted - selected) + ["Enter"]
