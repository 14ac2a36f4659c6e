"""Claude Code's screen (docs/agents.md, Claude Code), for when its files cannot be read: the input box and
the last answer.

The input box is a ``❯`` line between two ``─`` rules (``❯`` alone is also the cursor of dialogs, so the
rule above it is what marks the box); an answer block starts with ``●``, continuation lines are indented
by two spaces, and a finished turn ends with ``✻ <Verb>ed for 10s`` (2.1.332: ``… · done 7:40 AM``, then an
effort line or a notice above the box). What the screen shows is rendered
markdown, so an answer read from it is an approximation — the transcript is the exact source.
"""

from __future__ import annotations

import re

from pipeline.plugin.dialogs import asked, menu_keys, pick, unboxed
from pipeline.plugin.tools import strip_ansi, utf16_length

__all__ = ["BUSY_MARKERS", "dialog", "dialog_question", "input_box", "paste_placeholder", "permission_answer",
           "screen_answer"]

BUSY_MARKERS = ("esc to interrupt",)
_RULE = re.compile(r"^\s*─{3,}")
_SCROLLED = re.compile(r"^\s*─{3,} ↑ \d+ more ─")
_DONE = re.compile(r"^[✻✽✶✢·*]\s+\S+ed for \d")
_ANSWER = "● "
_TOOL_CALL = re.compile(r"^● [A-Za-z][\w.-]*\(.*\)\s*$")


def _is_rule(line: str) -> bool:
    return bool(_RULE.match(line))


def _box_top(lines: list[str]) -> int | None:
    """Index of the rule above the input box, searching from the bottom. A draft taller than the box
    scrolls it to the cursor: the top rule then says ``─── ↑ 5 more ───`` and the ``❯`` line is out of
    sight (2.1.332)."""
    for i in range(len(lines) - 1, 0, -1):
        if lines[i].startswith("❯") and _is_rule(lines[i - 1]):
            return i - 1
        if _SCROLLED.match(lines[i]) and i + 1 < len(lines):
            return i
    return None


#: the menus Claude Code 2.1.332 may show at start, before any session file: the folder-trust dialog, and
#: in the default permission mode an offer to make auto mode the default (``baton approve`` takes the "Yes",
#: ``deny`` the "No")
START_DIALOGS = ("Accessing workspace:", "Make auto mode your default permission mode?")
#: the dialogs Claude Code draws in place of its input box, by a line of each, and what the session file
#: calls them in ``waitingFor`` (docs/agents.md, Claude Code 2.1.332: the approval prompt, the auto-mode
#: dialog, and the start-up dialogs)
DIALOGS = (("Do you want to proceed?", "permission prompt"), ("Enter to stay in auto mode", "dialog open"),
           *((line, "dialog open") for line in START_DIALOGS))


def dialog(screen: str) -> str | None:
    """What Claude Code waits for a person for, read from ``screen`` (for when no session file says it):
    ``"permission prompt"`` or ``"dialog open"`` while such a dialog is below the last ``─`` rule and no
    input box shows; None otherwise."""
    lines = strip_ansi(screen).rstrip("\n").split("\n")
    if _box_top(lines) is not None:
        return None
    rule = next((i for i in range(len(lines) - 1, -1, -1) if _is_rule(lines[i])), None)
    if rule is None:
        return None
    below = [ln.strip() for ln in lines[rule + 1:]]
    for marker, reason in DIALOGS:
        if any(ln.startswith(marker) for ln in below):
            return reason
    return None


def dialog_question(screen: str) -> str | None:
    """What the dialog on ``screen`` asks (:func:`dialog` says one shows): for a permission prompt its
    question and the tool with its command — the dialog's title and its first line, or the line a dashed
    frame holds (2.1.197: ``Do you want to proceed?`` / ``Bash command: touch perm_marker.txt && ls``;
    2.1.332: ``… / Tool use: Agent(Survey the project)``); for another dialog its title."""
    if (reason := dialog(screen)) is None:
        return None
    lines = strip_ansi(screen).rstrip("\n").split("\n")
    rule = max(i for i, ln in enumerate(lines) if _is_rule(ln))
    below = [unboxed(ln) for ln in lines[rule + 1:] if unboxed(ln)]
    ask = next((i for i, ln in enumerate(below) if ln.startswith(DIALOGS[0][0])), 0)
    if reason != "permission prompt" or ask == 0:
        return asked(below[0])
    header, body = below[0], below[1:ask]
    dashed = next((i for i, ln in enumerate(body) if ln.startswith("╌")), None)
    command = body[dashed + 1] if dashed is not None and dashed + 1 < len(body) else body[0] if body else ""
    return asked(below[ask], f"{header}: {command}" if command else header)


_NUMBERED = re.compile(r"^\d+\.\s*")


def permission_answer(screen: str, approve: bool) -> list[str] | None:
    """The keys that answer the permission prompt or a start-up dialog on ``screen``, or None when none
    shows. The choices are the lines under ``Do you want to proceed?`` (a start-up dialog: the lines around
    the one marked ``❯``) down to a blank line, the selected one marked ``❯``: 2.1.332 draws ``❯ No`` /
    ``Yes`` (No selected), older versions ``❯ 1. Yes`` / ``2. Yes, and always allow …`` / ``3. No``, the
    trust dialog ``❯ No, exit`` / ``Yes, I trust this folder``. Approve takes a plain "Yes" (once, never
    "always"), deny the "No"."""
    lines = [ln.strip() for ln in strip_ansi(screen).rstrip("\n").split("\n")]
    if dialog(screen) == "permission prompt":
        first = max(i for i, ln in enumerate(lines) if ln.startswith(DIALOGS[0][0])) + 1
    elif dialog(screen) is not None and any(ln.startswith(START_DIALOGS) for ln in lines):
        first = max(i for i, ln in enumerate(lines) if ln.startswith("❯"))
        while first > 0 and lines[first - 1]:
            first -= 1
    else:
        return None
    labels: list[str] = []
    selected = 0
    for line in lines[first:]:
        if not line:
            break
        if line.startswith("❯"):
            selected = len(labels)
        labels.append(_NUMBERED.sub("", line.removeprefix("❯").strip()))
    once = (lambda s: s in ("Yes", "Yes."), lambda s: s.startswith("Yes") and "always" not in s)
    wanted = (pick(labels, *once)
              if approve else pick(labels, lambda s: s.startswith("No")))
    return None if wanted is None else menu_keys(selected, wanted)


def input_box(screen: str) -> str | None:
    """The text in the input box (a draft the user left there), "" when empty, None when no box shows."""
    lines = strip_ansi(screen).rstrip("\n").split("\n")
    top = _box_top(lines)
    if top is None:
        return None
    parts = [lines[top + 1][1:]]
    for line in lines[top + 2:]:
        if _is_rule(line):
            break
        parts.append(line)
    return "\n".join(p.strip() for p in parts).strip()


#: a long paste in the input box (docs/agent-versions.md, "Pasted drafts"): ``[Pasted text #K +N lines]``,
#: N the lines after the first; ``[Pasted text #K]`` for one line. K counts the session's pastes.
#: a paste longer than this (UTF-16 units, a tab counted as 4 spaces) is a placeholder whatever its lines
LONG_PASTE = 800
_PLACEHOLDER = re.compile(r"\[Pasted text #\d+(?: \+(\d+) lines?)?\]")


def paste_placeholder(draft: str, text: str) -> bool:
    """Whether the input box's ``draft`` is Claude Code's placeholder for pasting ``text`` (sanitized):
    the lines after the first must match, and a one-line placeholder stands only for a text over
    :data:`LONG_PASTE` characters; K cannot be known after a restart, so any K does."""
    m = _PLACEHOLDER.fullmatch(draft.strip())
    if m is None:
        return False
    more = text.count("\n")
    if m.group(1) is not None:
        return int(m.group(1)) == more
    return more == 0 and utf16_length(text.replace("\t", "    ")) > LONG_PASTE


def screen_answer(captured: str) -> str:
    """The last answer block on a captured screen: from the last ``●`` line that is not a tool call, to
    the turn's done line or the input box; prefix and indentation removed."""
    lines = strip_ansi(captured).rstrip("\n").split("\n")
    top = _box_top(lines)
    if top is not None:
        lines = lines[:top]
    # 2.1.332 puts an effort line or a notice between the done line and the box: cut at the last done line
    # unless an answer starts after it (then that line closed an earlier turn)
    done = next((i for i in range(len(lines) - 1, -1, -1) if _DONE.match(lines[i].strip())), None)
    if done is not None and not any(ln.startswith(_ANSWER) for ln in lines[done + 1:]):
        lines = lines[:done]
    while lines and not lines[-1].strip():
        lines.pop()
    start = next((i for i in range(len(lines) - 1, -1, -1)
                  if lines[i].startswith(_ANSWER) and not _TOOL_CALL.match(lines[i])), None)
    if start is None:
        return "\n".join(lines).strip("\n")
    block = [lines[start][len(_ANSWER) :]] + [
        ln[2:] if ln.startswith("  ") else ln for ln in lines[start + 1 :]
    ]
    return "\n".join(ln.rstrip() for ln in block).strip("\n")
