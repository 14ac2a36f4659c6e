"""Cline's screen (3.0.65, tests/fixtures/cline-3.0.65/screens): its busy line, its dialogs, its input box
and the placeholder a long paste shows as.

- busy: a braille spinner at a transcript line's start: ``⠙ Thinking... (esc to cancel)`` before the first
  token, then in place of the ``*`` of the message being streamed (``⠋ FAKE_ANSWER_BEGIN``);
- approval (auto-approve off): ``Cline needs permission`` / ``Approve tool call?`` / the tool
  (``run_commands``) / ``$ command`` / ``[y] Approve   [n] Deny`` in place of the input box;
- a question (the model's ``ask_question`` tool): ``Cline is asking a question`` / the question (wrapped,
  each line indented by 1) / its options (``  > PostgreSQL`` selected, ``    SQLite``) / ``    Type a
  response...`` in place of the input box, the spinner going on above it (``⠙ ask_question(…)``);
- first run: the provider picker (``Connect a model provider to get started.``) without auth; start-up
  notices (``Try ClinePass`` … ``Press Enter to open, any other key to close``);
- the input box: ``❯ draft`` between two rules (centred on the welcome screen), further lines indented by
  2; ``❯ Ask anything...`` (``❯ What can I do for you?`` before the first prompt) when empty;
- a bracketed paste of 5 lines or more shows as ``[<its first 48 characters, whitespace made single
  spaces>... Pasted +N lines]`` (a trailing line end not counted; wrapped like any draft in the welcome
  screen's narrow box); shorter ones, of any length, inline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.plugin.dialogs import asked
from pipeline.plugin.tools import line_count, strip_ansi

__all__ = ["BUSY", "PLACEHOLDERS", "Question", "approval_answer", "approval_question", "asked_question",
           "input_draft", "is_busy", "paste_placeholder", "sent_prompts", "waiting_for"]

BUSY = ("(esc to cancel)",)
PLACEHOLDERS = ("Ask anything...", "What can I do for you?")
#: a paste of this many lines or more is drawn as its placeholder (measured on 3.0.65)
PASTE_LINES = 5
PASTED = re.compile(r"^\[(.*)\.\.\. Pasted \+(\d+) lines\]$")
_SPINNER = re.compile(r"^ ?[\u2801-\u28ff] ")
_RULE = re.compile(r"^\s*─{8,}\s*$")
_PERMISSION = "Cline needs permission"
_APPROVE = re.compile(r"\[y\] Approve\s+\[n\] Deny")
_ASKING = "Cline is asking a question"
#: a line of the question (indented by 1), and an option under it (by 2, ``>`` marking the selected one)
_QUESTION_LINE = re.compile(r"^ (\S.*?)\s*$")
_OPTION = re.compile(r"^  [> ] (\S.*?)\s*$")
_DIALOGS = (
    ("Connect a model provider to get started.", "provider picker: sign in or bring your own provider"),
    ("Press Enter to open, any other key to close", "start-up notice"),
)
TAIL = 40


def _lines(screen: str) -> list[str]:
    return strip_ansi(screen).rstrip("\n").split("\n")[-TAIL:]


def _approval(lines: list[str]) -> int | None:
    """The line of ``Cline needs permission`` when its approval shows (its ``[y] Approve`` under it)."""
    at = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].strip() == _PERMISSION), None)
    if at is None or not any(_APPROVE.search(ln) for ln in lines[at:]):
        return None
    return at


@dataclass(frozen=True)
class Question:
    """The question Cline's ``ask_question`` shows: its text (wrapped lines joined) and the options offered
    (not the line for a typed response)."""

    text: str
    options: tuple[str, ...]


def _question(lines: list[str]) -> Question | None:
    """The question dialog on the screen, when one shows in place of the input box: its title, the
    question, the options, and last the line for a response of the person's own (``Type a response...``, or
    what they type there: ``> use CockroachDB|``)."""
    at = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].strip() == _ASKING), None)
    if at is None or _box(lines[at:]) is not None:
        return None
    text: list[str] = []
    options: list[str] = []
    for line in lines[at + 1:]:
        if (option := _OPTION.match(line)) is not None and text:
            options.append(option.group(1))
        elif (part := _QUESTION_LINE.match(line)) is not None and not options:
            text.append(part.group(1))
        elif line.strip() and (text or options):
            break
    if not text or len(options) < 2:  # the model's options (2 to 5), then the response's line
        return None
    return Question(" ".join(text), tuple(options[:-1]))


def asked_question(screen: str) -> Question | None:
    """The question the model asks the person through Cline's ``ask_question``, while it shows."""
    return _question(_lines(screen))


def is_busy(screen: str) -> bool:
    """Whether a spinner shows above the input box (Cline works)."""
    lines = _lines(screen)
    box = _box(lines)
    return any(_SPINNER.match(ln) for ln in (lines[: box[0]] if box is not None else lines))


def waiting_for(screen: str) -> str | None:
    """What a dialog on the screen waits for a person for, or None: the approval, a question (``question:
    Which database should the service use?``), the provider picker, a start-up notice."""
    lines = _lines(screen)
    if (question := _question(lines)) is not None:
        return f"question: {question.text}"
    at = _approval(lines)
    if at is not None:
        tool = next((ln.strip() for ln in lines[at + 2:] if ln.strip()), "")
        return f"permission prompt: {tool}" if tool else "permission prompt"
    text = "\n".join(lines)
    return next((reason for marker, reason in _DIALOGS if marker in text), None)


def approval_question(screen: str) -> str | None:
    """What the approval asks: ``Approve tool call?`` and the tool with its command (``run_commands: touch
    approved.txt && echo hello``); or the model's question and its options (``Which database…?`` /
    ``PostgreSQL, SQLite, MySQL or a typed response``); None when neither shows."""
    lines = _lines(screen)
    if (asking := _question(lines)) is not None:
        return asked(asking.text, ", ".join(asking.options) + " or a typed response")
    at = _approval(lines)
    if at is None:
        return None
    end = next(i for i in range(at, len(lines)) if _APPROVE.search(lines[i]))
    body = [ln.strip() for ln in lines[at + 1:end] if ln.strip()]
    question = body[0] if body else "Approve tool call?"
    tool = body[1] if len(body) > 1 else ""
    args = " ".join(ln.removeprefix("$ ") for ln in body[2:])
    return asked(question, f"{tool}: {args}" if tool and args else tool or None)


def approval_answer(screen: str, approve: bool) -> list[str] | None:
    """The key that answers the approval on ``screen`` (``y`` approves this call, ``n`` denies it), or None
    when none shows."""
    if _approval(_lines(screen)) is None:
        return None
    return ["y"] if approve else ["n"]


def _box(lines: list[str]) -> tuple[int, int] | None:
    """The input box's first and last line (between the last two rules), when one shows."""
    rules = [i for i, ln in enumerate(lines) if _RULE.match(ln)]
    for top, bottom in zip(reversed(rules[:-1]), reversed(rules[1:]), strict=True):
        if bottom > top + 1 and lines[top + 1].lstrip().startswith("❯"):
            return top + 1, bottom
    return None


def input_draft(screen: str) -> str | None:
    """The input box's text ("" when it shows its placeholder), or None when none shows (a dialog)."""
    lines = _lines(screen)
    box = _box(lines)
    if box is None or _approval(lines) is not None:
        return None
    first, end = box
    text = [lines[first].lstrip()[1:].strip(), *(ln.strip() for ln in lines[first + 1:end])]
    draft = "\n".join(text).strip()
    return "" if draft in PLACEHOLDERS else draft


def sent_prompts(screen: str) -> list[str]:
    """The prompts the transcript above the input box shows (`` ❯ prompt``), oldest first."""
    lines = _lines(screen)
    box = _box(lines)
    above = lines[: box[0] - 1] if box is not None else lines
    return [ln.strip()[1:].strip() for ln in above if ln.startswith(" ❯ ")]


def paste_placeholder(draft: str, text: str) -> bool:
    """Whether ``draft`` is Cline's placeholder for ``text`` (sanitized) pasted: its line count, and the
    start of its words."""
    found = PASTED.match(" ".join(draft.split()))  # wrapped in the welcome screen's narrow box
    lines = line_count(text)
    if found is None or lines < PASTE_LINES or int(found.group(2)) != lines:
        return False
    return " ".join(text.split()).startswith(" ".join(found.group(1).split()))
