"""Copilot CLI's screen (1.0.102, tests/fixtures/copilot-1.0.102/screens): the input between two rules, the
footer that says it works, the approval dialog, and the placeholder of a long paste.

- idle: ``❯`` at column 0 between two full-width rules (``───``); a draft's further lines are indented by 2;
- busy: the footer reads ``◉ Working · 17 B esc esc interrupt`` (glyph ◉/○/◎/●; ``esc again to interrupt``
  after one Esc; ``◉ Working esc esc edit prompt`` before the first token);
- approval: a box ``Do you want to run this command?`` … ``enter to select · esc to cancel``;
- folder trust, at start in a folder not trusted yet: a box ``Confirm folder trust`` … ``Do you trust the
  files in this folder?`` … ``enter to select`` (a dialog open; "1. Yes" trusts it for the session);
- a paste of more than 10 lines: ``[Paste #K - N lines]`` (N its lines; K counts the session's
  placeholder pastes); 10 lines or fewer, and one line of any length, are drawn inline
  (docs/agent-versions.md).
"""

from __future__ import annotations

import re

from pipeline.plugin.dialogs import asked, menu_keys, numbered_choices, pick, unboxed
from pipeline.plugin.tools import line_count, strip_ansi

__all__ = ["approval_answer", "approval_prompt", "approval_question", "input_draft", "is_working",
           "paste_placeholder", "strip_furniture"]

#: how many lines from the bottom the dialog and the input are looked for
DIALOG_LINES = 40
_WORKING = re.compile(r"^[◉○◎●]\s+Working\b")  # the glyph turns: ● too (seen live)
#: the question of the approval box, or of the folder-trust dialog
_ASKS = re.compile(r"^Do you (want to .+|trust the files in this folder)\?$")
_TRUST = "Do you trust the files in this folder?"
_SELECT = "enter to select"
_RULE = re.compile(r"^─{8,}$")
#: a paste of more than this many lines is drawn as its placeholder
PLACEHOLDER_LINES = 10
_PLACEHOLDER = re.compile(r"\[Paste #\d+ - (\d+) lines\]")


def _lines(screen: str) -> list[str]:
    return strip_ansi(screen).rstrip("\n").split("\n")[-DIALOG_LINES:]


def is_working(screen: str) -> bool:
    """Whether the footer (below the input's bottom rule) says Copilot works."""
    return any(_WORKING.match(ln.strip()) for ln in _lines(screen)[-4:])


def approval_prompt(screen: str) -> str | None:
    """``"permission prompt"`` while the approval box shows (its ``Do you want to …?`` and, under it, the
    ``enter to select`` hint), ``"dialog open"`` while the folder-trust dialog does; None otherwise."""
    lines = [ln.strip().strip("│").strip() for ln in _lines(screen)]
    title = next((i for i in range(len(lines) - 1, -1, -1) if _ASKS.match(lines[i])), None)
    if title is None or not any(_SELECT in ln for ln in lines[title + 1:]):
        return None
    return "dialog open" if lines[title] == _TRUST else "permission prompt"


#: the lines of a box's frame, and of a rule inside it
_FRAME = set("─╭╮╰╯│ ")


def approval_question(screen: str) -> str | None:
    """What the approval box on ``screen`` asks: its question, and its title with the command framed under
    it (1.0.102: ``Do you want to run this command?`` / ``Print hello: touch approved.txt && echo hello``;
    the folder-trust dialog: ``Confirm folder trust: <the folder>``); None when none shows."""
    if approval_prompt(screen) is None:
        return None
    raw = _lines(screen)
    lines = [unboxed(ln) for ln in raw]
    title = max(i for i, ln in enumerate(lines) if _ASKS.match(ln))
    top = next((i for i in range(title - 1, -1, -1) if raw[i].startswith("╭")), -1)
    inside = [ln for ln in lines[top + 1:title] if ln and not set(ln) <= _FRAME]
    what = f"{inside[0]}: {inside[1]}" if len(inside) > 1 else inside[0] if inside else None
    return asked(lines[title], what)


def approval_answer(screen: str, approve: bool) -> list[str] | None:
    """The keys that answer the approval box on ``screen``, or None when none shows. 1.0.102 numbers its
    choices under the question, the selected one marked ``❯`` (``❯ 1. Yes``, ``2. Yes, and don't ask again
    for …``, ``3. No, and tell Copilot what to do differently (Esc to stop)``; folder trust: ``1. Yes``,
    ``2. Yes, and remember this folder …``, ``3. No (Esc)``): approve takes the plain "Yes" (never "don't
    ask again", never "remember"), deny the "No"."""
    if approval_prompt(screen) is None:
        return None
    lines = [ln.strip().strip("│").strip() for ln in _lines(screen)]
    title = max(i for i, ln in enumerate(lines) if _ASKS.match(ln))
    labels, selected = numbered_choices(lines[title + 1:])
    wanted = (pick(labels, lambda s: s == "Yes", lambda s: s.startswith("Yes") and "don't ask" not in s)
              if approve else pick(labels, lambda s: s.startswith("No")))
    return None if wanted is None else menu_keys(selected, wanted)


def input_draft(screen: str) -> str | None:
    """The text in the input (``❯`` at column 0 between two rules, further lines indented by 2); "" when
    empty; None when no input shows (a dialog is open, or Copilot is starting)."""
    lines = _lines(screen)
    for at in range(len(lines) - 1, 0, -1):
        if not lines[at].startswith("❯") or not _RULE.match(lines[at - 1].strip()):
            continue
        text = [lines[at][1:].strip()]
        for line in lines[at + 1:]:
            if _RULE.match(line.strip()):
                return "\n".join(text).strip()
            text.append(line.strip())
        return None
    return None


def paste_placeholder(draft: str, text: str) -> bool:
    """Whether the input's ``draft`` is Copilot's placeholder for pasting ``text`` (sanitized): its line
    count must match, and be more than :data:`PLACEHOLDER_LINES`."""
    m = _PLACEHOLDER.fullmatch(draft.strip())
    lines = line_count(text)
    return m is not None and int(m.group(1)) == lines and lines > PLACEHOLDER_LINES


def strip_furniture(text: str) -> str:
    """An answer cut from the screen: the ``● `` it starts with, the right-hand side bar ``┃``."""
    lines = [re.sub(r"\s*┃$", "", ln) for ln in text.split("\n")]
    if lines and lines[0].lstrip().startswith("● "):
        lines[0] = lines[0].lstrip()[2:]
    return "\n".join(lines).strip()
