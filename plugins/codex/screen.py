"""Codex, seen from its screen: the input line (a draft, or the dim placeholder) and the furniture around
an answer. The screen is the last resort for answers and the second opinion for busy (docs/agents.md, Codex:
nothing shows while the answer streams, so the rollout says busy first)."""

from __future__ import annotations

import re

from pipeline.plugin.dialogs import asked, menu_keys, pick
from pipeline.plugin.tools import strip_ansi

__all__ = ["answer_streaming", "approval_answer", "approval_prompt", "approval_question", "composer_draft",
           "paste_placeholder", "strip_furniture"]

_SGR = re.compile(r"\x1b\[[0-9;:?]*m")
#: the title of Codex's approval dialogs (0.171.0: "Would you like to run the following command?")
_ASKS = re.compile(r"^Would you like to .+\?$")
_CONFIRM = "Press enter to confirm or esc to cancel"
#: how many lines from the bottom an approval dialog is looked for
DIALOG_LINES = 30
#: how many lines from the bottom the input line is looked for (a pasted draft drawn inline is several)
COMPOSER_LINES = 30


def approval_prompt(screen: str) -> str | None:
    """``"permission prompt"`` while Codex asks for an approval at the bottom of ``screen`` (a ``Would you
    like to …?`` title and, below it, ``Press enter to confirm or esc to cancel``); None otherwise.

    Codex 0.171.0 writes nothing to the rollout for an approval request: the rollout's last line is the
    ``function_call`` (``sandbox_permissions: "require_escalated"``) until a person answers, then its
    output follows (tests/fixtures/codex/approval/). So the screen is the only place that says it."""
    lines = [strip_ansi(ln).strip() for ln in screen.rstrip("\n").split("\n")[-DIALOG_LINES:]]
    title = next((i for i in range(len(lines) - 1, -1, -1) if _ASKS.match(lines[i])), None)
    if title is None or not any(ln.startswith(_CONFIRM) for ln in lines[title + 1:]):
        return None
    return "permission prompt"


def approval_question(screen: str) -> str | None:
    """What the approval dialog on ``screen`` asks: its title and the command it shows (0.171.0: ``Would you
    like to run the following command?`` / ``$ touch APPROVAL_PROBE.txt && echo PROBE_TOOL_OK``), or None
    when none shows."""
    if approval_prompt(screen) is None:
        return None
    lines = [strip_ansi(ln).strip() for ln in screen.rstrip("\n").split("\n")[-DIALOG_LINES:]]
    title = max(i for i, ln in enumerate(lines) if _ASKS.match(ln))
    command = next((ln for ln in lines[title + 1:] if ln.startswith("$ ")), None)
    return asked(lines[title], command)


_CHOICE = re.compile(r"^(›\s*)?\d+\.\s+(.*)$")


def approval_answer(screen: str, approve: bool) -> list[str] | None:
    """The keys that answer the approval dialog on ``screen``, or None when none shows. Its choices are
    the numbered lines under the title, the selected one marked ``›`` (0.171.0: ``› 1. Yes, proceed (y)``,
    ``2. Yes, and don't ask again for … (p)``, ``3. No, and tell Codex what to do differently (esc)``):
    approve takes the plain "Yes, proceed" (never "don't ask again"), deny the "No"."""
    if approval_prompt(screen) is None:
        return None
    lines = [strip_ansi(ln).strip() for ln in screen.rstrip("\n").split("\n")[-DIALOG_LINES:]]
    title = max(i for i, ln in enumerate(lines) if _ASKS.match(ln))
    labels: list[str] = []
    selected = 0
    for line in lines[title + 1:]:
        m = _CHOICE.match(line)
        if m is None:
            continue
        if m.group(1):
            selected = len(labels)
        labels.append(m.group(2))
    wanted = (pick(labels, lambda s: s.startswith("Yes, proceed"),
                   lambda s: s.startswith("Yes") and "don't ask again" not in s)
              if approve else pick(labels, lambda s: s.startswith("No")))
    return None if wanted is None else menu_keys(selected, wanted)


def composer_draft(screen: str, placeholders: tuple[str, ...] = ("Ask Codex to do anything",)) -> str | None:
    """The text in Codex's input line (``› …``) and its continuation lines (indented by two, down to the
    blank line above the footer), "" when it shows only the placeholder, None when no input line is on the
    bottom of the screen (Codex starting, or a dialog open: an approval dialog's selected answer,
    ``› 1. Yes, proceed (y)``, is drawn like an input line).

    ``screen`` may carry SGR escapes (``capture -e``): the placeholder is drawn dim, which tells it apart
    from a draft whatever its wording (older versions pick a random example)."""
    if approval_prompt(screen) is not None:
        return None
    lines = screen.rstrip("\n").split("\n")[-COMPOSER_LINES:]
    for at in range(len(lines) - 1, -1, -1):
        raw = lines[at]
        plain = strip_ansi(raw).strip()
        if not plain.startswith("›"):
            continue
        text = plain[1:].strip()
        rest = raw.split("›", 1)[1]
        for m in _SGR.finditer(rest):
            if strip_ansi(rest[: m.start()]).strip():
                break
            if _dim(m.group()):
                return ""
        if not text or any(text.startswith(p) for p in placeholders):
            return ""
        more = []
        for line in (strip_ansi(ln) for ln in lines[at + 1:]):
            if not line.strip() or not line.startswith("  "):
                break
            more.append(line.strip())
        return "\n".join([text, *more])
    return None


#: a paste of more than 1000 characters in the composer (docs/agent-versions.md, "Pasted drafts")
_PLACEHOLDER = re.compile(r"\[Pasted Content (\d+) chars\]")


#: the lines Codex draws under a turn that ended: ``Worked for 3s • 05:21`` (answered), ``■ Conversation
#: interrupted …`` (Esc), ``■ We’re currently experiencing high demand …`` (the API failed it)
_TURN_END = re.compile(r"^(─\s*)?Worked for |^■ ")


def answer_streaming(screen: str) -> bool:
    """Whether ``screen`` shows an answer still streaming: under the last prompt, an agent's ``• …`` block
    and no line that ends the turn (``Worked for …``, ``■ …``) between it and the input line. Codex 0.171.0
    shows no busy line meanwhile (docs/agents.md, Codex): the input line reads as it does when idle.

    The adapter need not ask: the rollout says busy from ``task_started`` to ``task_complete``. The proof
    of the board's states does (tests/test_codex_states.py): its truth is the screen once a key was
    pressed, and an answer streaming on under an idle-looking input is working, not idle."""
    lines = [strip_ansi(ln).rstrip() for ln in screen.rstrip("\n").split("\n")]  # blank rows may part them
    composer = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith("›")), None)
    if composer is None or approval_prompt(screen) is not None:
        return False
    for line in reversed(lines[:composer]):
        if _TURN_END.match(line.strip()) or line.startswith("›"):
            return False
        if line.startswith("• "):
            return True
    return False


def paste_placeholder(draft: str, text: str) -> bool:
    """Whether the composer's ``draft`` is Codex's placeholder for pasting ``text`` (sanitized): the
    count is of the text's characters."""
    m = _PLACEHOLDER.fullmatch(draft.strip())
    return m is not None and int(m.group(1)) == len(text)


def _dim(sgr: str) -> bool:
    """Whether an SGR sequence turns on dim (parameter 2, not part of a 38/48/58 colour)."""
    params = [int(x) if x.isdigit() else 0 for x in re.split("[;:]", sgr[2:-1] or "0")]
    i = 0
    while i < len(params):
        if params[i] in (38, 48, 58):
            i += 3 if i + 1 < len(params) and params[i + 1] == 5 else 5
            continue
        if params[i] == 2:
            return True
        i += 1
    return False


def strip_furniture(text: str) -> str:
    """Codex's screen around an answer: the ``•`` bullet it starts with, ``Worked for …`` after it."""
    lines = text.split("\n")
    while lines and re.match(r"^\s*(─ )?Worked for |^\s*$", lines[-1]):
        lines.pop()
    if lines and lines[0].startswith("• "):
        lines[0] = lines[0][2:]
    return "\n".join(lines)
