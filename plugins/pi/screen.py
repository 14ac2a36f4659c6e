"""What pi's screen shows (docs/agents.md, pi; tests/fixtures/pi-1.6.0/screens): its busy line, its input
box, the placeholder a long paste shows as, and its project-trust dialog.

- busy: a braille spinner before ``Working`` — in the input box's top rule on 1.x (``── ⠧ Working ───``),
  on a line of its own above the box on 0.73.1 (`` ⠸ Working...``); ``Retrying (1/3) in 2s...`` while it
  waits to retry a failed model call;
- the input box: the lines between the last two full-width rules (``─``), with no prompt sign; under it
  the cwd and the usage footer; a rule may carry ``↑ N more`` when the box scrolls;
- a bracketed paste of more than 10 lines shows as ``[paste #N +L lines]``, else one of more than 1000
  characters (UTF-16 units) as ``[paste #N C chars]``; shorter ones inline;
- 1.x asks ``Trust project folder?`` at start when the folder has ``.pi`` settings or resources: a menu
  (``→`` marks the choice; ↑↓ and Enter). pi asks no permission before a tool call.
"""

from __future__ import annotations

import re

from pipeline.plugin.dialogs import menu_keys, pick
from pipeline.plugin.tools import line_count, strip_ansi, utf16_length

__all__ = ["approval_answer", "input_draft", "is_busy", "paste_placeholder", "waiting_for"]

#: pi's thresholds (its editor's paste handler: more than 10 lines, else more than 1000 characters)
PASTE_LINES = 10
PASTE_CHARS = 1000
PASTED = re.compile(r"^\[paste #\d+ (?:\+(\d+) lines|(\d+) chars)\]$")
_BUSY = re.compile(r"[\u2800-\u28ff] (?:Working|Retrying \(|Compacting)")
_RULE = re.compile(r"^─{20,}")
TRUST = "Trust project folder?"
_CHOICE = re.compile(r"^\s*(→)?\s+(\S.*?)\s*$")


def _tail(screen: str, n: int = 40) -> list[str]:
    return strip_ansi(screen).rstrip("\n").split("\n")[-n:]


def is_busy(screen: str) -> bool:
    """The spinner's ``Working``/``Retrying`` near the bottom of the screen."""
    return any(_BUSY.search(line) for line in _tail(screen, 16))


def _box(lines: list[str]) -> list[str] | None:
    """The lines between the last two rules (the input box), or None when there are not two."""
    rules = [i for i, line in enumerate(lines) if _RULE.match(line.strip()) or line.startswith("── ")]
    if len(rules) < 2:
        return None
    top, bottom = rules[-2], rules[-1]
    return lines[top + 1:bottom]


def input_draft(screen: str) -> str | None:
    """The input box's text ("" when empty), or None when no input box shows (starting, a dialog)."""
    lines = _tail(screen)
    if waiting_for(screen) is not None:
        return None
    box = _box(lines)
    if box is None:
        return None
    return "\n".join(line.rstrip() for line in box).strip()


def paste_placeholder(draft: str, text: str) -> bool:
    """Whether ``draft`` is pi's placeholder for ``text`` pasted: the label its rule gives that text, with
    the count that must match."""
    found = PASTED.match(draft.strip())
    if found is None:
        return False
    lines = line_count(text)
    if lines > PASTE_LINES:
        return found.group(1) is not None and int(found.group(1)) == lines
    length = utf16_length(text)
    return length > PASTE_CHARS and found.group(2) is not None and int(found.group(2)) == length


def waiting_for(screen: str) -> str | None:
    """What a dialog on the screen waits for a person for, or None: pi 1.x's project-trust question."""
    return "project trust dialog" if any(TRUST in line for line in _tail(screen)) else None


def _choices(screen: str) -> tuple[list[str], int]:
    """The trust menu's labels and the selected one's index (the lines after the question's path and
    explanation, up to the key hints)."""
    lines = _tail(screen)
    at = next(i for i, line in enumerate(lines) if TRUST in line)
    labels: list[str] = []
    selected = 0
    for line in lines[at + 3:]:
        if "navigate" in line or _RULE.match(line.strip()):
            break
        m = _CHOICE.match(line)
        if m:
            selected = len(labels) if m.group(1) else selected
            labels.append(m.group(2))
    return labels, selected


def approval_answer(screen: str, approve: bool) -> list[str] | None:
    """The keys that answer the trust dialog on ``screen``, or None when none shows: approve trusts the
    folder for this session only (never for good), deny does not trust it, for this session only."""
    if waiting_for(screen) is None:
        return None
    labels, selected = _choices(screen)
    wanted = pick(labels, lambda s: s == "Trust (this session only)") if approve else \
        pick(labels, lambda s: s == "Do not trust (this session only)", lambda s: s == "Do not trust")
    return None if wanted is None else menu_keys(selected, wanted)
