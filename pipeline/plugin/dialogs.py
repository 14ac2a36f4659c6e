"""Answering an agent's permission prompt: the keys that move a menu's selection to a choice and take it
(:meth:`pipeline.plugin.agents.AgentAdapter.answer_keys`). Every agent draws its own menu; what they share is
a list of choices with one selected, moved by arrow keys and taken by Enter."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = ["menu_keys", "numbered_choices", "pick"]

#: a numbered choice in a box (``│ ● 1. Allow once │``, ``❯ 1. Yes``), its selection mark, number and label
_NUMBERED = re.compile(r"^[│┃\s]*(?:([●❯›>])\s*)?\d+\.\s+(.+?)[\s│┃]*$")


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
