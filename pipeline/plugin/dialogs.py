"""Answering an agent's permission prompt: the keys that move a menu's selection to a choice and take it
(:meth:`pipeline.plugin.agents.AgentAdapter.answer_keys`). Every agent draws its own menu; what they share is
a list of choices with one selected, moved by arrow keys and taken by Enter."""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["menu_keys", "pick"]


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
