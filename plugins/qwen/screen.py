"""What Qwen Code's screen shows (docs/agent-versions.md, Qwen Code): its busy line, its dialogs, its input
box, the follow-up suggestion drawn in it, and the placeholder a long paste shows as.

- busy: ``⠋ Poking the bear... (2s · ↓ 9 tokens · esc to cancel)``; meanwhile the footer offers ``Enter to
  steer · Ctrl+Q to queue`` (an Enter then is a steer, not a new turn). Both are drawn while its turn is
  "responding" (a tool running too), either tells it: the screen, not the session file, says whether Qwen
  works (its file lags);
- approval: ``Allow execution of: 'touch'?`` above numbered options (``› 1. Yes, allow once`` … ``4. No,
  suggest changes (esc)``), and ``Waiting for user confirmation...`` under them;
- the input box: ``> draft`` (continuation lines indented) between two rules, ``>   Type your message or
  @path/to/file`` when empty; a zero-width space follows the cursor;
- a **follow-up suggestion** is drawn where the placeholder is: the cursor on its first character, the rest
  in the placeholder's dim colour (``38;5;103``), where a person's words are in the default colour. Tab, Right
  or Enter would take it into the input: it is no draft, and only the escapes tell it from one;
- a paste of more than 10 lines or more than 1000 characters (code points) shows as ``[Pasted Content N
  chars]`` (`` #2`` when the same label is in use already), counting the characters whatever the lines;
- a shorter one is drawn inline, word-wrapped, and the box shows at most :data:`BOX_ROWS` rows of it: a
  long one (1000 characters in 11 rows at 120 columns) is drawn first from its first row, then — a render
  later (20-165 ms, measured: tests/fixtures/qwen-code-0.24.4/screens/inline_cases.json) — scrolled to the
  cursor, its end (the ``>`` stays on the box's first row).
"""

from __future__ import annotations

import re

from pipeline.plugin.dialogs import menu_keys, numbered_choices, pick
from pipeline.plugin.pastes import MIN_PARTIAL, collapsed
from pipeline.plugin.tools import line_count, strip_ansi

__all__ = ["BUSY", "PLACEHOLDER", "approval_answer", "input_draft", "paste_placeholder", "shows_paste_start",
           "waiting_for"]

BUSY = ("esc to cancel", "Enter to steer")
PLACEHOLDER = "Type your message or @path/to/file"
#: Qwen Code 0.24.4's LARGE_PASTE_LINE_THRESHOLD and LARGE_PASTE_CHAR_THRESHOLD
PASTE_LINES = 10
PASTE_CHARS = 1000
#: the rows of the input its box shows (its text buffer's viewport height)
BOX_ROWS = 10
PASTED = re.compile(r"^\[Pasted Content (\d+) chars\](?: #\d+)?$")
_ALLOW = re.compile(r"Allow execution of:? (?:'([^']+)'|\[([^\]]+)\]|(.+?))\?")
_DIALOGS = (
    ("Apply this change?", "permission prompt: edit"),
    ("Do you want to proceed?", "permission prompt"),
    ("Waiting for user confirmation", "permission prompt"),
    ("Do you trust", "folder trust dialog"),
    ("How would you like to authenticate", "authentication dialog"),
    ("Select Authentication Method", "authentication dialog"),
)
_RULE = re.compile(r"^\s*[─━]{10,}\s*$")
_CURSOR = "\x1b[4m"
_TOKEN = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|.", re.S)
_FOREGROUND = re.compile(r"^\x1b\[(?:[0-9;]*;)?38;[25];")


def waiting_for(screen: str) -> str | None:
    """What a dialog on the screen waits for a person for, or None."""
    tail = "\n".join(strip_ansi(screen).rstrip("\n").split("\n")[-40:])
    found = _ALLOW.search(tail)
    if found:
        return f"permission prompt: {next(g for g in found.groups() if g).strip()}"
    return next((reason for marker, reason in _DIALOGS if marker in tail), None)


def approval_answer(screen: str, approve: bool) -> list[str] | None:
    """The keys that answer the permission dialog on ``screen``, or None when none shows: approve takes
    "Yes, allow once" (never an "Always allow"), deny the "No"."""
    lines = strip_ansi(screen).rstrip("\n").split("\n")[-40:]
    asks = [i for i, ln in enumerate(lines) if _ALLOW.search(ln) or "Apply this change?" in ln
            or "Do you want to proceed?" in ln]
    if not asks:
        return None
    labels, selected = numbered_choices(lines[asks[-1] + 1:])
    once = (lambda s: s.startswith("Yes, allow once"), lambda s: s.startswith(("Yes", "Allow once")))
    wanted = pick(labels, *once) if approve else pick(labels, lambda s: s.startswith("No"))
    return None if wanted is None else menu_keys(selected, wanted)


def _box(lines: list[str]) -> tuple[int, int] | None:
    """The input box's first and end line (between its two rules, the last pair on screen), or None."""
    plain = [strip_ansi(ln) for ln in lines]
    rules = [i for i in range(len(plain) - 1, max(len(plain) - 60, -1), -1) if _RULE.match(plain[i])]
    for end, begin in zip(rules, rules[1:], strict=False):
        if begin + 1 < end and plain[begin + 1].startswith(">"):
            return begin + 1, end
    return None


def is_ghost(line: str) -> bool:
    """Whether the input's first line (with escapes) shows ghost text — the placeholder or a follow-up
    suggestion: after ``> ``, the cursor cell (underlined) comes first, and what follows it is drawn in a
    foreground colour of its own (``38;…``), where a person's draft goes on in the default one."""
    tokens = iter(_TOKEN.findall(line.lstrip()))
    step = "prompt"
    for token in tokens:
        escape = token.startswith("\x1b")
        if step == "prompt" and not escape:  # the ``>``
            if token != ">":
                return False
            step = "cursor"
        elif step == "cursor" and token == _CURSOR:
            step = "cell"
        elif step == "cursor" and not escape and token != " ":
            return False  # text before the cursor: a draft
        elif step == "cell" and not escape:
            step = "after"
        elif step == "after":
            if not escape:
                return False
            if _FOREGROUND.match(token):
                return True
    return False


def input_draft(screen: str) -> str | None:
    """The input box's text ("" when it shows the placeholder or a follow-up suggestion), or None when no
    input box shows. ``screen`` with escapes tells a suggestion from a draft; without, a suggestion reads as
    a draft (so a caller that must not take one for a person's words captures with escapes)."""
    lines = screen.rstrip("\n").split("\n")
    box = _box(lines)
    if box is None:
        return None
    first, end = box
    if is_ghost(lines[first]):
        return ""
    text = [strip_ansi(ln).replace("\u200b", "") for ln in lines[first:end]]
    head = text[0][1:].strip()
    if head.startswith(PLACEHOLDER):
        return ""
    return "\n".join([head, *(ln.strip() for ln in text[1:])]).strip()


def paste_placeholder(draft: str, text: str) -> bool:
    """Whether ``draft`` is Qwen Code's placeholder for ``text`` pasted: the label its rule gives that text,
    its character count (code points) matching."""
    found = PASTED.match(draft.strip())
    if found is None:
        return False
    chars = len(text)
    return (chars > PASTE_CHARS or line_count(text) > PASTE_LINES) and int(found.group(1)) == chars


def shows_paste_start(draft: str, text: str) -> bool:
    """Whether ``draft`` is the first view Qwen Code draws of ``text`` pasted inline: its box full
    (:data:`BOX_ROWS` rows) of the paste's first rows, not yet scrolled to the cursor. Only right after
    batonpass pasted into an empty input does it tell that the paste landed: a person's draft may share a
    hand-off's first lines (the same template), so it is never taken for the paste otherwise."""
    shown, pasted = collapsed(draft), collapsed(text)
    return (draft.count("\n") + 1 >= BOX_ROWS and len(shown) >= MIN_PARTIAL and shown != pasted
            and pasted.startswith(shown))
