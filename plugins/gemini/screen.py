"""What Gemini CLI's screen shows (docs/agent-versions.md, Gemini CLI): its busy line, its dialogs, its input
box and the placeholder a long paste shows as.

- busy: a braille spinner line ``⠙ Thinking... (esc to cancel, 2s)``, with hooks ``⠙ Executing Hook: …
  (esc to cancel, 0s)``; a stale ``Executing Hook: …`` line without spinner stays after the turn;
- approval: ``Allow execution of [Shell]?`` (and ``Apply this change?`` for edits) above numbered options;
- first run: the folder-trust dialog (answered by ``baton approve``/``deny`` too) and the authentication
  dialogs;
- the input box: `` > draft`` (continuation lines indented) between a rule and the ``workspace`` footer,
  ``>   Type your message or @path/to/file`` when empty;
- a paste of more than 5 lines shows as ``[Pasted Text: N lines]``, else one of more than 500 characters
  (UTF-16 units) as ``[Pasted Text: N chars]`` (`` #2`` appended when the same label is in use already).
"""

from __future__ import annotations

import re

from pipeline.plugin.dialogs import asked, menu_keys, numbered_choices, pick, unboxed
from pipeline.plugin.tools import line_count, strip_ansi, utf16_length

__all__ = ["BUSY", "PLACEHOLDER", "approval_answer", "approval_question", "input_draft", "paste_placeholder",
           "waiting_for"]

BUSY = ("(esc to cancel",)
PLACEHOLDER = "Type your message or @path/to/file"
#: Gemini CLI's thresholds (LARGE_PASTE_LINE_THRESHOLD, LARGE_PASTE_CHAR_THRESHOLD in its bundle)
PASTE_LINES = 5
PASTE_CHARS = 500
PASTED = re.compile(r"^\[Pasted Text: (\d+) (lines|chars)(?: #\d+)?\]$")
_ALLOW = re.compile(r"Allow execution of (?:\[([^\]]+)\]|(.+?))\?")
#: the start-up dialog of a folder not trusted yet (``baton approve`` trusts it)
TRUST = "Do you trust the files in this folder?"
#: what it prints once the trust dialog is answered, under the dialog, while a new process starts
RESTARTING = "is restarting to apply the trust changes"
_DIALOGS = (
    ("Apply this change?", "permission prompt: edit"),
    (TRUST, "folder trust dialog"),
    ("How would you like to authenticate", "authentication dialog"),
    ("Enter Gemini API Key", "API key dialog"),
)
_RULE = re.compile(r"^\s*[─━]{10,}")
_FOOTER = ("workspace (/directory)", "sandbox")
_HINTS = ("Shift+Tab to accept edits", "? for shortcuts", "Press Ctrl+O to expand pasted text",
          "auto-accept edits", "YOLO mode")


def _tail(screen: str) -> list[str]:
    """The screen's last 40 lines, escapes stripped, less those above a restart's notice: the trust dialog
    stays drawn above ``Gemini CLI is restarting to apply the trust changes...`` for the ~7 s the new
    process takes to start (seen on 0.61.0), answered."""
    lines = strip_ansi(screen).rstrip("\n").split("\n")[-40:]
    restart = max((i for i, ln in enumerate(lines) if RESTARTING in ln), default=-1)
    return lines[restart + 1:]


def waiting_for(screen: str) -> str | None:
    """What a dialog on the screen waits for a person for, or None."""
    tail = "\n".join(_tail(screen))
    found = _ALLOW.search(tail)
    if found:
        return f"permission prompt: {(found.group(1) or found.group(2)).strip()}"
    return next((reason for marker, reason in _DIALOGS if marker in tail), None)


def approval_question(screen: str) -> str | None:
    """What the approval dialog on ``screen`` asks: its question and the tool line at the dialog's top
    (0.61.0: ``Allow execution of [Shell]?`` / ``Shell: touch approved.txt && echo hello``, drawn as
    ``? Shell  touch approved.txt && echo hello``); None when none shows."""
    lines = [unboxed(ln) for ln in _tail(screen)]
    asks = [i for i, ln in enumerate(lines) if _ALLOW.search(ln) or "Apply this change?" in ln]
    if not asks:
        return None
    tool = next((ln[2:] for ln in reversed(lines[: asks[-1]]) if ln.startswith("? ")), None)
    name, _, command = (tool or "").partition("  ")
    return asked(lines[asks[-1]], f"{name}: {command.strip()}" if command.strip() else tool)


def approval_answer(screen: str, approve: bool) -> list[str] | None:
    """The keys that answer the permission dialog or the start-up folder-trust dialog on ``screen``, or
    None when neither shows. 0.61.0 numbers its choices under the question, the selected one marked ``●``
    (``● 1. Allow once``, ``2. Allow for this session``, ``3. No, suggest changes (esc)``; the trust
    dialog's ``● 1. Trust folder (my-app)``, ``2. Trust parent folder (…)``, ``3. Don't trust``): approve
    takes "Allow once" (never "for this session") or trusts this folder (never its parent), deny the "No"
    or "Don't trust"."""
    lines = _tail(screen)
    asks = [i for i, ln in enumerate(lines) if _ALLOW.search(ln) or "Apply this change?" in ln]
    trust = [i for i, ln in enumerate(lines) if TRUST in ln]
    if not asks and not trust:
        return None
    labels, selected = numbered_choices(lines[(asks or trust)[-1] + 1:])
    if approve:
        wanted = pick(labels, lambda s: s.startswith("Allow once"), lambda s: s.startswith(("Allow", "Yes")),
                      lambda s: s.startswith("Trust folder"))
    else:
        wanted = pick(labels, lambda s: s.startswith("No"), lambda s: s.startswith("Don't trust"))
    return None if wanted is None else menu_keys(selected, wanted)


def _input_lines(screen: str) -> list[str] | None:
    """The input box's lines (after the last rule, before the footer), or None when there is none."""
    lines = strip_ansi(screen).rstrip("\n").split("\n")
    rule = next((i for i in range(len(lines) - 1, max(len(lines) - 40, -1), -1) if _RULE.match(lines[i])),
                None)
    if rule is None:
        return None
    box: list[str] = []
    for line in lines[rule + 1:]:
        if any(line.strip().startswith(f) for f in _FOOTER) or _RULE.match(line):
            break
        if line.strip() and not any(line.strip().startswith(h) for h in _HINTS):
            box.append(line)
    return box if box and box[0].lstrip().startswith(">") else None


def input_draft(screen: str) -> str | None:
    """The input box's text ("" when it shows the placeholder), or None when no input box shows."""
    box = _input_lines(screen)
    if box is None:
        return None
    first = box[0].lstrip()[1:].strip()
    if first.startswith(PLACEHOLDER):
        return ""
    return "\n".join([first, *(line.strip() for line in box[1:])]).strip()


def paste_placeholder(draft: str, text: str) -> bool:
    """Whether ``draft`` is Gemini CLI's placeholder for ``text`` pasted: the label its rule gives that
    text, with the count that must match."""
    found = PASTED.match(draft.strip())
    if found is None:
        return False
    lines = line_count(text)
    if lines > PASTE_LINES:
        return found.group(2) == "lines" and int(found.group(1)) == lines
    length = utf16_length(text)
    return length > PASTE_CHARS and found.group(2) == "chars" and int(found.group(1)) == length
