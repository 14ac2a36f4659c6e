"""OpenCode's screen: the text waiting in its input box, and the permission dialog that replaces it.

A permission prompt is not in OpenCode's store (the tool part stays ``running``, docs/agents.md, OpenCode), so
the screen is the only place that tells it: a ``△ Permission required`` panel over the input box, with ``Allow
once`` / ``Allow always`` / ``Reject`` buttons on its bottom row (1.18.33).
"""

from __future__ import annotations

import re

from pipeline.plugin.dialogs import asked, menu_keys, unboxed
from pipeline.plugin.tools import line_count, strip_ansi, utf16_length

__all__ = ["input_box", "input_draft", "paste_placeholder", "permission_answer", "permission_prompt",
           "permission_question"]

#: how many lines from the bottom the dialog is looked for (it is drawn over the input box)
DIALOG_LINES = 30


def input_box(screen: str, placeholders: tuple[str, ...] = ("Ask anything",)) -> str | None:
    """The text in OpenCode's input box: the ``┃`` lines above its mode line (``┃  Build · …``), which sits
    on the box's bottom border (``╹▀▀▀``), up to the border's width (the sidebar of a wide terminal is on
    the same rows). "" when the box is empty or shows its placeholder; None when no box shows — OpenCode
    still starting (it drops what is typed until shortly before it draws the box: docs/agents.md, OpenCode),
    or a dialog over it."""
    lines = strip_ansi(screen).rstrip("\n").split("\n")
    bottom = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].lstrip().startswith("╹▀")), None)
    if bottom is None or bottom < 1 or not lines[bottom - 1].strip().startswith("┃"):
        return None
    # a wide terminal shows the session's sidebar on the same rows: the box ends where its border does
    width = len(lines[bottom].rstrip())
    box = []
    for line in reversed(lines[: bottom - 1]):  # above the mode line
        stripped = line[:width].strip()
        if not stripped.startswith("┃"):
            break
        box.append(stripped[1:].strip())
    text = "\n".join(reversed(box)).strip()
    return "" if any(text.startswith(p) for p in placeholders) else text


def input_draft(screen: str, placeholders: tuple[str, ...] = ("Ask anything",)) -> str:
    """What :func:`input_box` reads, "" when no box shows."""
    return input_box(screen, placeholders) or ""


#: a paste of 3 lines or more, or of over 150 characters, in the input box (docs/agent-versions.md, "Pasted
#: drafts"); no number, so two pastes of the same text look the same
#: a paste longer than this (UTF-16 units) is a placeholder whatever its lines
LONG_PASTE = 150
_PLACEHOLDER = re.compile(r"\[Pasted ~(\d+) lines?\]")


def paste_placeholder(draft: str, text: str) -> bool:
    """Whether the input box's ``draft`` is OpenCode's placeholder for pasting ``text`` (sanitized): the
    count is of the text's lines once trimmed (a long single line is ``~1 lines``), and a text of fewer
    than 3 lines is a placeholder only when over :data:`LONG_PASTE` characters."""
    m = _PLACEHOLDER.fullmatch(draft.strip())
    lines, trimmed = line_count(text.strip()), text.strip()
    return m is not None and int(m.group(1)) == lines and (lines >= 3 or utf16_length(trimmed) > LONG_PASTE)


def permission_prompt(screen: str) -> str | None:
    """``"permission prompt"`` while OpenCode's permission dialog shows at the bottom of ``screen``: its
    ``Permission required`` title and, below it, the row of its buttons. None otherwise (an answer that
    merely quotes the words has no buttons row under them)."""
    lines = [ln.strip() for ln in strip_ansi(screen).rstrip("\n").split("\n")[-DIALOG_LINES:]]
    title = next((i for i, ln in enumerate(lines) if ln.lstrip("┃ △").startswith("Permission required")),
                 None)
    if title is None:
        return None
    if any("Allow once" in ln and "Reject" in ln for ln in lines[title + 1:]):
        return "permission prompt"
    return None


#: what parts a line of the dialog from the session's sidebar beside it, in a wide terminal
_GAP = re.compile(r"\s{4,}")


def permission_question(screen: str) -> str | None:
    """What the permission dialog on ``screen`` asks: its title and the line under it, which says what for
    (1.18.33: ``Permission required`` / ``← Access external directory /etc``), without the sidebar a wide
    terminal draws on the same rows; None when no dialog shows."""
    if permission_prompt(screen) is None:
        return None
    lines = [_GAP.split(unboxed(ln))[0] for ln in strip_ansi(screen).rstrip("\n").split("\n")[-DIALOG_LINES:]]
    title = max(i for i, ln in enumerate(lines) if ln.lstrip("△ ").startswith("Permission required"))
    what = next((ln for ln in lines[title + 1:] if ln), None)
    return asked(lines[title].lstrip("△ "), what)


#: the dialog's buttons, left to right (1.18.33); the first is selected when the dialog opens
BUTTONS = ("Allow once", "Allow always", "Reject")
_SGR = re.compile(r"\x1b\[([0-9;:]*)m")


def permission_answer(screen: str, approve: bool) -> list[str] | None:
    """The keys that answer the permission dialog on ``screen`` (captured with SGR escapes), or None when
    none shows: Left/Right move the selection along the row of buttons, Enter takes it. Approve takes
    "Allow once" (never "Allow always"), deny "Reject". The selected button is drawn only in colour — the
    one button whose background differs from the others'; on a screen without escapes, the first."""
    if permission_prompt(screen) is None:
        return None
    row = next((ln for ln in reversed(screen.rstrip("\n").split("\n")[-DIALOG_LINES:])
                if all(b in strip_ansi(ln) for b in BUTTONS)), "")
    backgrounds = [_background_at(row, row.find(b)) for b in BUTTONS]
    odd = [i for i, bg in enumerate(backgrounds) if backgrounds.count(bg) == 1]
    selected = odd[0] if len(odd) == 1 else 0
    return menu_keys(selected, 0 if approve else BUTTONS.index("Reject"), across=True)


def _background_at(line: str, at: int) -> str:
    """The background colour the SGR escapes before ``at`` in ``line`` leave set ("" the default)."""
    bg = ""
    for m in _SGR.finditer(line[: max(at, 0)]):
        params = m.group(1).replace(":", ";").split(";")
        i = 0
        while i < len(params):
            p = params[i]
            if p in ("", "0", "49"):
                bg = ""
            elif p == "48":
                size = 3 if params[i + 1:i + 2] == ["5"] else 5
                bg, i = ";".join(params[i:i + size]), i + size - 1
            elif p == "38":
                i += 2 if params[i + 1:i + 2] == ["5"] else 4
            elif p.isdigit() and (40 <= int(p) <= 47 or 100 <= int(p) <= 107):
                bg = p
            i += 1
    return bg
