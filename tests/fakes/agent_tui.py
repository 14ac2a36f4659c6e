"""Stand-ins for Claude Code, Codex, OpenCode, Gemini CLI, Copilot CLI, Qwen Code, pi and Cline as TARGETS:
real raw-mode programs in real panes that draw what the real TUIs draw, state by state, and write the agent's
own files when they take a prompt.

Each is a claim about its real agent, held to recordings of the real CLI by tests/test_standin_fidelity.py
(the pinned versions' screens in tests/fixtures/*/screens/): the idle input, a short paste drawn inline, a
long paste drawn as the agent's placeholder (docs/agent-versions.md, "Pasted drafts"), the busy line and
the approval dialog. A paste is kept in the input until Enter — as in the real TUIs, never echoed as typed
text — so a crash between a paste and its Enter leaves the target exactly as a real agent would. Their
timing too, where it matters to delivery (measured on the pinned CLIs): Copilot CLI draws a paste 0.25 s
after it arrived; Gemini CLI takes an Enter 30 ms or less after a typed key, or ~0.1 s after a paste, for a
newline (so an Enter read together with its paste leaves the paste in the input, as the real one did).
OpenCode starts on a blank screen, dropping what is typed, for ``start_s`` (0.5 s; the real one for
seconds: tests/fixtures/opencode-1.18.33/screens/start_blank.txt); ``deaf_s`` has any of them drop what is
typed for that long once it shows its input.

On Enter the stand-in writes the turn's start to the agent's files (Claude Code: ``sessions/<pid>.json``
busy and a ``user`` transcript line, the paste wrapped in ``<pasted_content>`` when it was a placeholder;
Codex: ``task_started`` and the ``UserMessage`` in a rollout it holds open; OpenCode: a user message and a
step in its store; Gemini CLI: ``projects.json`` and a chats file of ``user``/``gemini`` lines; Copilot
CLI: ``inuse.<pid>.lock``, ``open-sessions-state.json``'s ``working`` and ``events.jsonl``; pi: a session
file made at the first prompt, not held open), logs
``{"message": …}`` to ``--log``, works ``--work-s`` seconds, writes the answer and logs ``{"answer": …}``.
A prompt holding ``NEEDS_APPROVAL`` first shows the agent's approval dialog, its choices moved by the arrow
keys and taken by Enter (Esc refuses), and logs each key it got (``{"key": …}``) and the answer
(``{"approval": "approved"|"denied"}``): approved, the turn goes on; denied, the agent answers that it was
refused. pi asks nothing before a tool (it just runs it): its one dialog is the project-trust question
1.x asks at start in a folder with ``.pi/`` settings, which its stand-in asks then too (``pi-0.73.1``, the
old package's look, never asks it).

Run: ``python -m tests.fakes.agent_tui --agent claude --log FILE`` (in a tmux pane; ``CLAUDE_CONFIG_DIR``,
``CODEX_HOME``, ``XDG_DATA_HOME``, ``GEMINI_CLI_HOME``, ``COPILOT_HOME``, ``QWEN_HOME`` or
``PI_CODING_AGENT_DIR`` set as for the real agent).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import termios
import time
import tty
import unicodedata
import uuid
from pathlib import Path
from typing import Any

from pipeline.plugin.pastes import line_count, utf16_length

__all__ = ["LOOKS", "agent_tui_command", "placeholder"]

PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"
APPROVAL = "NEEDS_APPROVAL"


def placeholder(agent: str, text: str, count: int, rows: int = 40) -> str | None:
    """What ``agent``'s input shows for a paste of ``text`` (sanitized), the ``count``-th placeholder of its
    session (Gemini CLI: the ``count``-th copy of its label in the input), in a pane of ``rows``; None when
    the text is drawn inline. The rules recorded from the pinned CLIs (docs/agent-versions.md, "Pasted
    drafts"; tests/fixtures/*/screens/paste_cases.json)."""
    return _RULES[agent](text, count, rows)


def _claude(text: str, count: int, rows: int) -> str | None:
    newlines = text.count("\n")
    if utf16_length(text.replace("\t", "    ")) > 800 or newlines > min(rows - 10, 2):
        return f"[Pasted text #{count} +{newlines} lines]" if newlines else f"[Pasted text #{count}]"
    return None


def _codex(text: str, count: int, rows: int) -> str | None:
    return f"[Pasted Content {len(text)} chars]" if len(text) > 1000 else None  # code points


def _opencode(text: str, count: int, rows: int) -> str | None:
    trimmed = text.strip()
    lines = trimmed.count("\n") + 1
    return f"[Pasted ~{lines} lines]" if lines >= 3 or utf16_length(trimmed) > 150 else None


def _gemini(text: str, count: int, rows: int) -> str | None:
    if line_count(text) > 5:
        label = f"{line_count(text)} lines"
    elif utf16_length(text) > 500:
        label = f"{utf16_length(text)} chars"
    else:
        return None
    return f"[Pasted Text: {label}{f' #{count}' if count > 1 else ''}]"


def _qwen(text: str, count: int, rows: int) -> str | None:
    # code points, whatever the lines; numbered only when the same label is in the input already
    if len(text) > 1000 or line_count(text) > 10:
        return f"[Pasted Content {len(text)} chars]" + (f" #{count}" if count > 1 else "")
    return None


def _copilot(text: str, count: int, rows: int) -> str | None:
    # characters play no part: one line of any length is drawn inline
    return f"[Paste #{count} - {line_count(text)} lines]" if line_count(text) > 10 else None


def _pi(text: str, count: int, rows: int) -> str | None:
    # more than 10 lines, else more than 1000 UTF-16 units
    if line_count(text) > 10:
        return f"[paste #{count} +{line_count(text)} lines]"
    return f"[paste #{count} {utf16_length(text)} chars]" if utf16_length(text) > 1000 else None


def _cline(text: str, count: int, rows: int) -> str | None:
    # 5 lines or more (characters play no part), its first 48 characters with whitespace made single spaces
    lines = line_count(text)
    return f"[{' '.join(text.split())[:48].rstrip()}... Pasted +{lines} lines]" if lines >= 5 else None


_RULES = {"claude": _claude, "codex": _codex, "opencode": _opencode, "gemini": _gemini, "copilot": _copilot,
          "qwen": _qwen, "pi": _pi, "pi-0.73.1": _pi, "cline": _cline}


def agent_tui_command(agent: str, log: Path, *, work_s: float = 0.2, start_s: float | None = None,
                      deaf_s: float = 0.0) -> str:
    """The shell command that runs the stand-in of ``agent`` (for ``TmuxServer.new_pane``); ``start_s``: how
    long it starts (default: its look's :attr:`Look.start_s`); ``deaf_s``: how long, once it shows its input,
    it drops what is typed all the same (a target that takes no paste although it looks ready)."""
    start = ([] if start_s is None else ["--start-s", str(start_s)]) + ["--deaf-s", str(deaf_s)]
    return shlex.join(
        [sys.executable, "-m", "tests.fakes.agent_tui", "--agent", agent, "--log", str(log), "--work-s",
         str(work_s), *start]
    )


# ---- what each agent draws -----------------------------------------------------------------------------


def qwen_rows(line: str, width: int) -> list[str]:
    """One line of Qwen Code's input as its text buffer wraps it (``calculateLayout``): rows of at most
    ``width`` columns, broken before the last space that fits (the space dropped), a longer word cut."""
    rows: list[str] = []
    pos = 0
    while pos < len(line) or not rows:
        cols, end, space = 0, pos, -1
        while end < len(line) and cols + _cells(line[end]) <= width:
            space = end if line[end] == " " else space
            cols, end = cols + _cells(line[end]), end + 1
        if end < len(line) and space > pos:
            end = space
        end = max(end, pos + 1) if line else end
        rows.append(line[pos:end])
        pos = end + (1 if end < len(line) and line[end] == " " else 0)
    return rows


def _cells(char: str) -> int:
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1



class Look:
    """One agent's screen: the rows above its input, the input with a draft, busy and dialog rows."""

    comm = ""
    #: how long after a paste arrived it is drawn (the keys after it are taken in order all the same)
    paste_draw_s = 0.0
    #: an Enter this soon after a typed key, or after a paste, is a newline, not a submit
    fast_return_s = 0.0
    paste_return_s = 0.0
    #: an agent that draws a change, then once more (its input scrolled): how long after, and whether the
    #: last :meth:`input` asks for that render
    render_again_s = 0.0
    moved = False
    #: how long it starts: a blank screen, its cursor hidden, and what is typed meanwhile dropped
    start_s = 0.0

    def __init__(self, width: int) -> None:
        self.width = width

    def input(self, draft: list[str], busy: bool) -> list[str]:
        raise NotImplementedError

    #: the dialog's choices, in order, the first selected when it opens; whether they stand in a row
    choices: tuple[str, ...] = ()
    across = False
    #: whether a prompt for a tool (``NEEDS_APPROVAL``) opens the dialog; whether it asks at start instead
    asks_before_tools = True
    asks_trust = False

    def dialog(self, selected: int = 0) -> list[str]:
        raise NotImplementedError

    def approves(self, choice: str) -> bool:
        return choice.startswith(("Yes", "Allow"))

    #: keys that answer the dialog at once (Cline: ``y`` approves, ``n`` denies)
    answer_keys: dict[str, bool] = {}

    def prompt_row(self, text: str) -> list[str]:
        return [text.split("\n")[0][: self.width - 4]]

    def answer_rows(self, text: str) -> list[str]:
        return [text[: self.width - 4]]


class ClaudeLook(Look):
    """Claude Code 2.1.332: ``❯`` between two rules, the footer says ``esc to interrupt`` while busy."""

    comm = "claude"

    def input(self, draft: list[str], busy: bool) -> list[str]:
        rule = "\x1b[38;5;244m" + "─" * self.width + "\x1b[39m"
        body = [f"❯ {draft[0]}" if draft else "❯ \x1b[7m \x1b[0m"] + [f"  {ln}" for ln in draft[1:]]
        footer = (
            "  \x1b[38;5;220m⏵⏵ auto mode on\x1b[38;5;246m (shift+tab to cycle) · "
            + ("esc to interrupt · " if busy else "")
            + "← for agents\x1b[39m"
        )
        above = ["\x1b[38;5;174m✢ Crystallizing… (1s · ↓ 9 tokens)\x1b[39m"] if busy else [""]
        return [*above, " " * (self.width - 20) + "◐ medium · /effort", rule, *body, rule, footer]

    choices = ("No", "Yes")

    def dialog(self, selected: int = 0) -> list[str]:
        dashed = "╌" * self.width
        return [
            "─" * self.width,
            " Tool use",
            " │ Run a command",
            dashed,
            " Bash(touch APPROVAL_PROBE.txt)",
            dashed,
            "",
            " Do you want to proceed?",
            *[f" {'❯' if i == selected else ' '} {c}" for i, c in enumerate(self.choices)],
            "",
            " Esc to cancel · Tab to amend",
        ]

    def prompt_row(self, text: str) -> list[str]:
        return [f"❯ {text.split(chr(10))[0][: self.width - 4]}", ""]

    def answer_rows(self, text: str) -> list[str]:
        return [f"● {text[: self.width - 4]}", "", "✻ Worked for 1s", ""]


class CodexLook(Look):
    """Codex 0.171.0: ``›`` and the dim placeholder; ``• Working (… esc to interrupt)`` above while busy."""

    comm = "codex"

    def input(self, draft: list[str], busy: bool) -> list[str]:
        line = (
            f"\x1b[1m›\x1b[0m {draft[0]}"
            if draft
            else "\x1b[1m›\x1b[0m \x1b[2mAsk Codex to do anything\x1b[0m"
        )
        above = ["• Working (\x1b[2m0s • esc to interrupt\x1b[0m)", ""] if busy else ["", ""]
        return [
            *above,
            line,
            *[f"  {ln}" for ln in draft[1:]],
            "",
            "  \x1b[38;5;223mgpt-fake default\x1b[39m · /home/dev/api",
            "  ← for agents · ? for shortcuts",
        ]

    choices = ("Yes, proceed (y)", "Yes, and don't ask again for commands that start with `touch` (p)",
               "No, and tell Codex what to do differently (esc)")

    def approves(self, choice: str) -> bool:
        return choice.startswith("Yes")

    def dialog(self, selected: int = 0) -> list[str]:
        return [
            "• Running touch APPROVAL_PROBE.txt",
            "",
            "  Would you like to run the following command?",
            "",
            "  $ touch APPROVAL_PROBE.txt",
            "",
            *[f"{'›' if i == selected else ' '} {i + 1}. {c}" for i, c in enumerate(self.choices)],
            "",
            "  Press enter to confirm or esc to cancel",
        ]

    def prompt_row(self, text: str) -> list[str]:
        return [f"› {text.split(chr(10))[0][: self.width - 4]}", ""]

    def answer_rows(self, text: str) -> list[str]:
        return [f"• {text[: self.width - 4]}", ""]


class OpenCodeLook(Look):
    """OpenCode 1.18.33: a ``┃`` box over a ``╹▀▀▀`` border, its mode line inside; ``esc interrupt`` below."""

    comm = "opencode"
    box = 76
    #: 1.18.33 shows a blank screen for seconds, dropping what is typed until shortly before its box shows
    #: (tests/fixtures/opencode-1.18.33/screens/start_blank.txt, start.json; docs/agents.md, OpenCode)
    start_s = 0.5

    def input(self, draft: list[str], busy: bool) -> list[str]:
        shown = draft or ['Ask anything… "Fix a TODO in the codebase"']
        status = "   ⬝⬝⬝⬝⬝⬝⬝■  esc interrupt" if busy else "   /home/dev/web"
        return [
            "  ┃",
            *[f"  ┃  {ln}" for ln in shown],
            "  ┃",
            "  ┃  Build · Fake Fake",
            "  ╹" + "▀" * self.box,
            status,
        ]

    choices = ("Allow once", "Allow always", "Reject")
    across = True

    def dialog(self, selected: int = 0) -> list[str]:
        buttons = "  ".join(f"\x1b[48;5;215m {c} \x1b[48;5;234m" if i == selected else f" {c} "
                            for i, c in enumerate(self.choices))
        return [
            "  ┃",
            "  ┃  △ Permission required",
            "  ┃    ← Access external directory /etc",
            "  ┃",
            f"  ┃  {buttons}           ⇆ select  enter confirm",
            "  ┃",
        ]

    def prompt_row(self, text: str) -> list[str]:
        return ["  ┃", f"  ┃  {text.split(chr(10))[0][: self.width - 8]}", "  ┃", ""]

    def answer_rows(self, text: str) -> list[str]:
        return [f"     {text[: self.width - 8]}", "", "     ▣  Build · Fake · 0.2s", ""]


class GeminiLook(Look):
    """Gemini CLI 0.61.0: `` > `` in a box between a rule and the ``workspace`` footer; a spinner line
    ``⠹ Thinking... (esc to cancel, 0s)`` above the rule while busy."""

    comm = "gemini"
    #: its FAST_RETURN_TIMEOUT (30 ms), and the 40 ms after an "unsafe" (bracketed, non-kitty) paste in which
    #: an Enter is a newline: measured on the pinned CLI, an Enter 0.05 s after the paste was a newline,
    #: 0.15 s after it a submit (the timer starts once React took the paste)
    fast_return_s = 0.03
    paste_return_s = 0.1

    def input(self, draft: list[str], busy: bool) -> list[str]:
        shortcuts = "? for shortcuts"
        status = " ⠹ Thinking... (esc to cancel, 0s)" if busy else ""
        body = (
            [f" > {draft[0]}", *[f"   {ln}" for ln in draft[1:]]]
            if draft
            else [" >   Type your message or @path/to/file"]
        )
        return [
            "",
            status + " " * max(1, self.width - len(status) - len(shortcuts) - 1) + shortcuts,
            "─" * self.width,
            " Shift+Tab to accept edits",
            "",
            *body,
            "",
            " workspace (/directory)" + " " * 40 + "sandbox" + " " * 40 + "/model",
            " ~/my-app" + " " * 54 + "no sandbox" + " " * 37 + "gemini-2.5-flash",
        ]

    choices = ("Allow once", "Allow for this session", "No, suggest changes (esc)")

    def dialog(self, selected: int = 0) -> list[str]:
        inner = self.width - 4
        return [
            "╭" + "─" * (self.width - 2) + "╮",
            "│ ? Shell  touch APPROVAL_PROBE.txt".ljust(self.width - 1) + "│",
            "│ ╭" + "─" * (inner - 2) + "╮ │",
            "│ │ touch APPROVAL_PROBE.txt".ljust(self.width - 3) + "│ │",
            "│ ╰" + "─" * (inner - 2) + "╯ │",
            "│ Allow execution of [Shell]?".ljust(self.width - 1) + "│",
            "│".ljust(self.width - 1) + "│",
            *[f"│ {'●' if i == selected else ' '} {i + 1}. {c}".ljust(self.width - 1) + "│"
              for i, c in enumerate(self.choices)],
            "╰" + "─" * (self.width - 2) + "╯",
        ]

    def prompt_row(self, text: str) -> list[str]:
        return [f" > {text.split(chr(10))[0][: self.width - 4]}", ""]

    def answer_rows(self, text: str) -> list[str]:
        return [f"✦ {text[: self.width - 4]}", ""]


class CopilotLook(Look):
    """Copilot CLI 1.0.102: ``❯`` at column 0 between two full-width rules; the footer reads
    ``◉ Working · … esc esc interrupt`` while busy."""

    comm = "copilot"
    #: Copilot gathers a bracketed paste before it draws it: 0.24-0.28 s on the pinned CLI (inline and
    #: placeholder alike; an Enter sent at once still submits the paste)
    paste_draw_s = 0.25

    def input(self, draft: list[str], busy: bool) -> list[str]:
        rule = "─" * self.width
        body = [f"❯ {draft[0]}", *[f"  {ln}" for ln in draft[1:]]] if draft else ["❯"]
        footer = (
            " ◉ Working · 17 B esc esc interrupt"
            if busy
            else " ← open sidebar · Interactive · Manual Approval · / commands · ? help · tab next tab"
        )
        return [
            "",
            " ~/my-app",
            rule,
            *body,
            rule,
            footer + " " * max(1, self.width - len(footer) - 5) + "fake",
        ]

    choices = ("Yes", "Yes, and don't ask again for `touch` in this directory (~/my-app)",
               "No, and tell Copilot what to do differently (Esc to stop)")

    def dialog(self, selected: int = 0) -> list[str]:
        def row(text: str) -> str:
            return "│ " + text.ljust(self.width - 4) + " │"

        return [
            "╭" + "─" * (self.width - 2) + "╮",
            row("Create a file"),
            row("─" * (self.width - 4)),
            row("touch APPROVAL_PROBE.txt"),
            row(""),
            row("Do you want to run this command?"),
            row(""),
            *[row(f"{'❯' if i == selected else ' '} {i + 1}. {c}") for i, c in enumerate(self.choices)],
            row(""),
            row("↑/↓ to navigate · enter to select · esc to cancel"),
            "╰" + "─" * (self.width - 2) + "╯",
        ]

    def prompt_row(self, text: str) -> list[str]:
        return [f" ❯ {text.split(chr(10))[0][: self.width - 12]}", ""]

    def answer_rows(self, text: str) -> list[str]:
        return [f" ● {text[: self.width - 4]}", ""]


class QwenLook(Look):
    """Qwen Code 0.24.4: ``> `` between two full-width rules, the model under them; a spinner line
    ``⠋ Poking the bear... (0s · ↓ 9 tokens · esc to cancel)`` above the box while busy. Its input is
    word-wrapped to 90% of the width less 6 columns, and the box shows 10 rows of it: drawn at the scroll it
    had, then a render later scrolled to the cursor (the end) — a long inline paste shows its first rows
    first, its last ones 20-165 ms on (recorded: tests/fixtures/qwen-code-0.24.4/screens/inline_*)."""

    comm = "qwen"
    rows = 10
    render_again_s = 0.06

    def __init__(self, width: int) -> None:
        super().__init__(width)
        self.scroll = 0

    def input(self, draft: list[str], busy: bool) -> list[str]:
        rule = "─" * self.width
        rows = [row for ln in draft for row in qwen_rows(ln, max(2, self.width * 9 // 10 - 6))]
        shown = rows[self.scroll:self.scroll + self.rows]
        cursor = len(rows) - 1  # the cursor is at the end
        if shown and cursor < self.scroll + len(shown):
            shown[-1] += " \u200b"
        # its scroll effect: where the next render starts
        follow = min(max(self.scroll, cursor - self.rows + 1), cursor)
        follow = min(max(follow, 0), max(len(rows) - self.rows, 0))
        self.moved, self.scroll = follow != self.scroll, follow
        body = [f"> {shown[0]}", *[f"  {ln}" for ln in shown[1:]]] if shown else [
            ">   Type your message or @path/to/file"]
        steer = "Enter to steer · Ctrl+Q to queue · " if busy else ""
        return [
            "  ⠋ Poking the bear... (0s · ↓ 9 tokens · esc to cancel)" if busy else "",
            rule,
            *body,
            rule,
            "  ➜ my-app · fake-model",
            f"  {steer}⏸ Ask permissions (shift + tab to cycle)",
        ]

    choices = ("Yes, allow once", "Always allow run 'touch *' commands in this project",
               "Always allow run 'touch *' commands for this user", "No, suggest changes (esc)")

    def dialog(self, selected: int = 0) -> list[str]:
        return [
            "  ? Shell touch APPROVAL_PROBE.txt (Touch a file) ←",
            "",
            "     touch APPROVAL_PROBE.txt",
            "",
            "   Allow execution of: 'touch'?",
            "",
            *[f"   {'›' if i == selected else ' '} {i + 1}. {c}" for i, c in enumerate(self.choices)],
            "",
            "",
            "  ⠏ Waiting for user confirmation...",
        ]

    def prompt_row(self, text: str) -> list[str]:
        return [f"  > {text.split(chr(10))[0][: self.width - 6]}", ""]

    def answer_rows(self, text: str) -> list[str]:
        return [f"  ◆︎ {text[: self.width - 6]}", ""]


class PiLook(Look):
    """pi 1.6.0: the input box is the lines between two full-width rules, with no prompt sign, the cwd and
    the usage line under it; busy, the top rule carries the spinner (``── ⠇ Working ───``). Its one dialog
    is the project-trust question at start."""

    comm = "pi"
    #: asks nothing before a tool: a prompt for one just runs (NEEDS_APPROVAL shows no dialog)
    asks_before_tools = False
    #: asks ``Trust project folder?`` at start when the folder has ``.pi/`` settings
    asks_trust = True

    def rule(self, busy: bool) -> str:
        head = "── ⠇ Working " if busy else ""
        return head + "─" * (self.width - len(head))

    def input(self, draft: list[str], busy: bool) -> list[str]:
        return [
            "",
            self.rule(busy),
            *(draft or [""]),
            "─" * self.width,
            "~/proj/my-app",
            "0.0%/128k (auto)".ljust(self.width - len("fake-model")) + "fake-model",
        ]

    choices = ("Trust", "Trust parent folder (/home/dev/proj)", "Trust (this session only)", "Do not trust",
               "Do not trust (this session only)")

    def approves(self, choice: str) -> bool:
        return choice.startswith("Trust")

    def dialog(self, selected: int = 0) -> list[str]:
        return [
            "─" * self.width,
            "",
            " Trust project folder?",
            f" {os.getcwd()}",
            "",
            " This allows pi to load .pi settings and resources, install missing project packages, and "
            "execute project extensions.",
            "",
            *[f" {'→' if i == selected else ' '} {c}" for i, c in enumerate(self.choices)],
            "",
            " ↑↓ navigate  enter select  escape/ctrl+c cancel",
            "",
            "─" * self.width,
        ]

    def prompt_row(self, text: str) -> list[str]:
        return ["", f" {text.split(chr(10))[0][: self.width - 4]}", ""]

    def answer_rows(self, text: str) -> list[str]:
        return ["", f" {text[: self.width - 4]}", ""]


class PiOldLook(PiLook):
    """pi 0.73.1 (``@mariozechner/pi-coding-agent``): the same box, but busy is a line of its own above it
    (`` ⠇ Working...``), and it asks no trust question."""

    asks_trust = False

    def input(self, draft: list[str], busy: bool) -> list[str]:
        return [
            " ⠇ Working..." if busy else "",
            "",
            "─" * self.width,
            *(draft or [""]),
            "─" * self.width,
            "~/proj/my-app",
            "↑300 ↓60 $0.002 0.1%/128k (auto)".ljust(self.width - len("fake-model")) + "fake-model",
        ]


class ClineLook(Look):
    """Cline 3.0.65: ``❯`` between two full-width rules, the model and folder under them; a spinner line
    ``⠙ Thinking... (esc to cancel)`` above the box while busy; its approval in place of the box, answered
    by ``y`` or ``n``."""

    comm = "cline"

    def input(self, draft: list[str], busy: bool) -> list[str]:
        rule = "─" * self.width
        body = [f"❯ {draft[0]}", *[f"  {ln}" for ln in draft[1:]]] if draft else ["❯ Ask anything..."]
        return [
            " ⠙ Thinking... (esc to cancel)" if busy else "",
            "",
            rule,
            *body,
            rule,
            " fake-model (100) $0.00" + " " * max(1, self.width - 43) + "○ Plan ● Act (Tab)",
            " my-app",
            " Auto-approve all disabled (Shift+Tab)",
        ]

    choices = ("Approve", "Deny")
    answer_keys = {"y": True, "n": False}

    def dialog(self, selected: int = 0) -> list[str]:
        return [
            " ⠙ Thinking... (esc to cancel)",
            "",
            " Cline needs permission",
            "",
            " Approve tool call?",
            "",
            " run_commands",
            "",
            "   $ touch APPROVAL_PROBE.txt",
            "",
            "  [y] Approve   [n] Deny",
            "",
            " fake-model (100) $0.00",
            " my-app",
            " Auto-approve all disabled (Shift+Tab)",
        ]

    def prompt_row(self, text: str) -> list[str]:
        return [f" ❯ {text.split(chr(10))[0][: self.width - 4]}", ""]

    def answer_rows(self, text: str) -> list[str]:
        return [f" * {text[: self.width - 4]}", ""]



LOOKS: dict[str, type[Look]] = {
    "claude": ClaudeLook,
    "codex": CodexLook,
    "opencode": OpenCodeLook,
    "gemini": GeminiLook,
    "copilot": CopilotLook,
    "qwen": QwenLook,
    "pi": PiLook,
    "pi-0.73.1": PiOldLook,
    "cline": ClineLook,
}


# ---- the files each agent writes ------------------------------------------------------------------------


class ClaudeFiles:
    """``sessions/<pid>.json`` and the transcript, as 2.1.332 writes them (docs/agent-versions.md)."""

    def __init__(self) -> None:
        self.config = Path(os.environ["CLAUDE_CONFIG_DIR"])
        self.session, self.cwd = str(uuid.uuid4()), os.getcwd()
        with open("/proc/self/stat") as f:
            self.proc_start = f.read().rsplit(")", 1)[1].split()[19]
        self.started = int(time.time() * 1000)
        folder = (
            self.config / "projects" / "".join(c if c.isalnum() and c.isascii() else "-" for c in self.cwd)
        )
        folder.mkdir(parents=True, exist_ok=True)
        (self.config / "sessions").mkdir(mode=0o700, parents=True, exist_ok=True)
        self.transcript = folder / f"{self.session}.jsonl"
        self.parent: str | None = None
        self.status("idle")

    def status(self, status: str) -> None:
        path = self.config / "sessions" / f"{os.getpid()}.json"
        now = time.time_ns() // 1_000_000
        data = {
            "pid": os.getpid(),
            "sessionId": self.session,
            "cwd": self.cwd,
            "startedAt": self.started,
            "procStart": self.proc_start,
            "version": "2.1.332",
            "kind": "interactive",
            "entrypoint": "cli",
            "status": status,
            "updatedAt": now,
            "statusUpdatedAt": now,
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)

    def write(self, *objs: dict[str, Any]) -> None:
        lines = []
        for obj in objs:
            me = str(uuid.uuid4())
            stamp = (
                time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
            )
            lines.append(
                json.dumps(
                    {
                        "parentUuid": self.parent,
                        "isSidechain": False,
                        "uuid": me,
                        "timestamp": stamp,
                        "sessionId": self.session,
                        "cwd": self.cwd,
                        "version": "2.1.332",
                        **obj,
                    }
                )
                + "\n"
            )
            self.parent = me
        with open(self.transcript, "a", encoding="utf-8") as f:
            f.write("".join(lines))

    def prompt(self, text: str, as_placeholder: bool) -> None:
        self.status("busy")
        if as_placeholder:  # what the real CLI sends the model for a long paste
            tag = uuid.uuid4().hex[:4]
            text = f'\n\n<pasted_content id="{tag}">\n{text}\n</pasted_content id="{tag}">\n'
        self.write(
            {"type": "user", "promptId": str(uuid.uuid4()), "message": {"role": "user", "content": text}}
        )

    def waiting(self) -> None:
        self.status("waiting")

    def answered(self, approved: bool) -> None:
        self.status("busy")

    def answer(self, text: str) -> None:
        msg = f"msg_{uuid.uuid4().hex[:12]}"
        self.write(
            {
                "type": "assistant",
                "requestId": f"req_{msg}",
                "message": {
                    "id": msg,
                    "model": "claude-opus-4-8",
                    "role": "assistant",
                    "stop_reason": "end_turn",
                    "content": [{"type": "text", "text": text}],
                },
            },
            {"type": "system", "subtype": "turn_duration", "durationMs": 100},
        )
        self.status("idle")


class CodexFiles:
    """A rollout held open for the life of the process, as ``codex --no-daemon`` 0.171.0 holds it."""

    def __init__(self) -> None:
        from tests.support.codex import iso, uuid7

        self.iso = iso
        now = time.time()
        self.thread = uuid7(now)
        local = time.localtime(now)
        folder = Path(os.environ["CODEX_HOME"]) / "sessions" / time.strftime("%Y/%m/%d", local)
        folder.mkdir(parents=True, exist_ok=True)
        name = f"rollout-{time.strftime('%Y-%m-%dT%H-%M-%S', local)}-{self.thread}.jsonl"
        self.file = open(folder / name, "ab")  # noqa: SIM115 - held open for the life of the process
        self.turn = ""
        self.write(
            {
                "type": "session_meta",
                "payload": {
                    "id": self.thread,
                    "timestamp": iso(now),
                    "cwd": os.getcwd(),
                    "originator": "codex-tui",
                    "source": "cli",
                },
            }
        )

    def write(self, *records: dict[str, Any]) -> None:
        stamp = self.iso(time.time())
        self.file.write("".join(json.dumps({"timestamp": stamp, **r}) + "\n" for r in records).encode())
        self.file.flush()

    def prompt(self, text: str, as_placeholder: bool) -> None:
        self.turn = f"turn-{uuid.uuid4().hex[:12]}"
        self.write(
            {"type": "event_msg", "payload": {"type": "task_started", "turn_id": self.turn}},
            {
                "type": "event_msg",
                "payload": {
                    "type": "item_completed",
                    "turn_id": self.turn,
                    "item": {"type": "UserMessage", "content": [{"type": "text", "text": text}]},
                },
            },
        )

    def waiting(self) -> None:
        """Codex writes nothing for an approval request (docs/agent-versions.md): the screen says it."""

    def answer(self, text: str) -> None:
        self.write(
            {
                "type": "event_msg",
                "payload": {
                    "type": "item_completed",
                    "turn_id": self.turn,
                    "item": {"type": "AgentMessage", "content": [{"type": "Text", "text": text}]},
                },
            },
            {
                "type": "event_msg",
                "payload": {"type": "task_complete", "turn_id": self.turn, "last_agent_message": text},
            },
        )


class OpenCodeFiles:
    """The session's rows in ``$XDG_DATA_HOME/opencode/opencode.db``, as 1.18.33 writes them."""

    def __init__(self) -> None:
        from tests.fakes.opencode_store import StoreWriter

        self.store = StoreWriter(Path(os.environ["XDG_DATA_HOME"]) / "opencode" / "opencode.db")
        self.session, self.step = "", ""

    def prompt(self, text: str, as_placeholder: bool) -> None:
        if not self.session:  # made with the first prompt, as the TUI does
            self.session = self.store.session(os.getcwd())
        user = self.store.user(self.session, text)
        self.step = self.store.step(self.session, user)

    def waiting(self) -> None:
        """OpenCode keeps the tool part ``running`` (docs/agent-versions.md): the screen says it."""

    def answer(self, text: str) -> None:
        self.store.finish(self.session, self.step, texts=(text,))


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


class GeminiFiles:
    """``projects.json`` and the session's chats file, as 0.61.0 writes them (docs/agent-versions.md): the
    file is made at startup; a tool's ``gemini`` line is written again, with ``toolCalls``, once it ran."""

    def __init__(self) -> None:
        gemini = Path(os.environ["GEMINI_CLI_HOME"]) / ".gemini"
        cwd, now = os.getcwd(), time.time()
        slug = Path(cwd).name.lower() or "root"
        gemini.mkdir(parents=True, exist_ok=True)
        (gemini / "projects.json").write_text(json.dumps({"projects": {cwd: slug}}, indent=2))
        chats = gemini / "tmp" / slug / "chats"
        chats.mkdir(parents=True, exist_ok=True)
        self.session = str(uuid.uuid4())
        stamp = time.strftime("%Y-%m-%dT%H-%M", time.gmtime(now))
        self.file = chats / f"session-{stamp}-{self.session[:8]}.jsonl"
        self.asked: dict[str, Any] | None = None
        context = f"<session_context>\nThis is the Gemini CLI.\n- **Workspace Directories:**\n  - {cwd}\n"
        self.write(
            {
                "sessionId": self.session,
                "projectHash": uuid.uuid4().hex * 2,
                "startTime": _iso(now),
                "lastUpdated": _iso(now),
                "kind": "main",
            },
            {
                "$set": {
                    "messages": [self.message("user", [{"text": context + "</session_context>"}])],
                    "lastUpdated": _iso(now),
                }
            },
        )

    @staticmethod
    def message(kind: str, content: object, **more: Any) -> dict[str, Any]:
        return {
            "id": str(uuid.uuid4()),
            "timestamp": _iso(time.time()),
            "type": kind,
            "content": content,
            **more,
        }

    def write(self, *records: dict[str, Any]) -> None:
        with open(self.file, "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(r) + "\n" for r in records))

    def said(self, *messages: dict[str, Any]) -> None:
        lines: list[dict[str, Any]] = []
        for m in messages:
            lines += [m, {"$set": {"lastUpdated": m["timestamp"]}}]
        self.write(*lines)

    def reply(self, text: str, **more: Any) -> dict[str, Any]:
        tokens = {"input": 100, "output": 10, "cached": 0, "thoughts": 0, "tool": 0, "total": 110}
        return self.message("gemini", text, thoughts=[], tokens=tokens, model="gemini-2.5-flash", **more)

    def prompt(self, text: str, as_placeholder: bool) -> None:
        self.said(self.message("user", [{"text": text}]))  # a placeholder is sent as the text it stands for

    def waiting(self) -> None:
        """The model's call, written as a finished answer would be until the tool ran (the recorded trap)."""
        self.asked = self.reply("I will run a command.")
        self.said(self.asked)

    def answered(self, approved: bool) -> None:
        if self.asked is None or not approved:  # refused: the answer that says so follows
            return
        call = f"run_shell_command__{uuid.uuid4().hex[:12]}"
        result = [
            {
                "functionResponse": {
                    "id": call,
                    "name": "run_shell_command",
                    "response": {"output": "Output: (empty)"},
                }
            }
        ]
        self.said(
            {
                **self.asked,
                "toolCalls": [
                    {
                        "id": call,
                        "name": "run_shell_command",
                        "result": result,
                        "args": {"command": "touch APPROVAL_PROBE.txt"},
                        "status": "success",
                        "timestamp": _iso(time.time()),
                    }
                ],
            },
            self.message("user", result),
        )
        self.asked = None

    def answer(self, text: str) -> None:
        self.said(self.reply(text))


class CopilotFiles:
    """``session-state/<id>/`` with ``inuse.<pid>.lock`` from the start, ``events.jsonl`` from the first
    prompt, and ``open-sessions-state.json``'s ``working``, as 1.0.102 writes them (docs/agents.md)."""

    def __init__(self) -> None:
        self.home = Path(os.environ["COPILOT_HOME"])
        self.session, self.started = str(uuid.uuid4()), time.time()
        self.folder = self.home / "session-state" / self.session
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "workspace.yaml").write_text(
            f"id: {self.session}\ncwd: {os.getcwd()}\nclient_name: github/cli\n"
            f"created_at: {_iso(self.started)}\n"
        )
        (self.folder / f"inuse.{os.getpid()}.lock").write_text(str(os.getpid()))
        self.parent: str | None = None
        self.interaction, self.request = "", ""
        self.working(False)

    def working(self, flag: bool) -> None:
        path = self.home / "open-sessions-state.json"
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            state = {}
        state[self.session] = {
            "schemaVersion": 1,
            "openedAt": _iso(self.started),
            "refreshedAt": _iso(time.time()),
            "working": flag,
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(path)

    def write(self, *events: tuple[str, dict[str, Any]]) -> None:
        lines = []
        for kind, data in events:
            me = str(uuid.uuid4())
            lines.append(
                json.dumps(
                    {
                        "type": kind,
                        "data": data,
                        "id": me,
                        "timestamp": _iso(time.time()),
                        "parentId": self.parent,
                    }
                )
                + "\n"
            )
            self.parent = me
        with open(self.folder / "events.jsonl", "a", encoding="utf-8") as f:
            f.write("".join(lines))

    def prompt(self, text: str, as_placeholder: bool) -> None:
        if not (self.folder / "events.jsonl").exists():  # made at the first prompt
            self.write(
                (
                    "session.start",
                    {
                        "sessionId": self.session,
                        "version": 1,
                        "producer": "copilot-agent",
                        "copilotVersion": "1.0.102",
                        "startTime": _iso(self.started),
                        "selectedModel": "fake",
                        "context": {"cwd": os.getcwd()},
                    },
                )
            )
        self.working(True)
        self.interaction = str(uuid.uuid4())
        self.write(
            (
                "user.message",
                {
                    "content": text,
                    "messageId": str(uuid.uuid4()),
                    "delivery": "idle",
                    "interactionId": self.interaction,
                    "turnId": "0",
                },
            ),
            ("assistant.turn_start", {"turnId": "0", "interactionId": self.interaction}),
        )

    def said(self, text: str, requests: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        return (
            "assistant.message",
            {
                "messageId": str(uuid.uuid4()),
                "model": "fake",
                "content": text,
                "toolRequests": requests,
                "interactionId": self.interaction,
                "turnId": "0",
            },
        )

    def waiting(self) -> None:
        call, self.request = f"call_{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
        command = {"command": "touch APPROVAL_PROBE.txt", "description": "Create a file"}
        self.write(
            self.said(
                "I will run a command.\n", [{"toolCallId": call, "name": "bash", "arguments": command}]
            ),
            (
                "tool.execution_start",
                {"toolCallId": call, "toolName": "bash", "arguments": command, "turnId": "0"},
            ),
            (
                "permission.requested",
                {
                    "requestId": self.request,
                    "permissionRequest": {
                        "kind": "shell",
                        "toolCallId": call,
                        "fullCommandText": command["command"],
                    },
                },
            ),
        )

    def answered(self, approved: bool) -> None:
        kind = {"kind": "approved"} if approved else {"kind": "cancelled", "reason": "Session aborted"}
        self.write(
            ("permission.completed", {"requestId": self.request, "result": kind}),
            ("assistant.turn_end", {"turnId": "0"}),
            ("assistant.turn_start", {"turnId": "0", "interactionId": self.interaction}),
        )

    def answer(self, text: str) -> None:
        usage = {"model": "fake", "inputTokens": 100, "outputTokens": 10}
        self.write(
            ("session.usage_record", {"usage": usage}),
            self.said(text, []),
            ("assistant.turn_end", {"turnId": "0"}),
        )
        self.working(False)


class QwenFiles:
    """``sessions/<pid>.json`` naming the session, and the session's file (made at its first prompt), as
    0.24.4 writes them (docs/agent-versions.md, Qwen Code): a ``real_user`` record per prompt, the model's
    call (``functionCall``) while a tool waits, an ``api_response`` event before each reply."""

    def __init__(self) -> None:
        qwen = Path(os.environ["QWEN_HOME"])
        self.cwd, self.session = os.getcwd(), str(uuid.uuid4())
        (qwen / "sessions").mkdir(parents=True, exist_ok=True)
        pid_file = {"schemaVersion": 1, "pid": os.getpid(), "sessionId": self.session, "cwd": self.cwd,
                    "kind": "tui"}
        (qwen / "sessions" / f"{os.getpid()}.json").write_text(json.dumps(pid_file))
        chats = qwen / "projects" / "".join(c if c.isalnum() else "-" for c in self.cwd) / "chats"
        chats.mkdir(parents=True, exist_ok=True)
        self.file = chats / f"{self.session}.jsonl"
        self.last: str | None = None
        self.prompts = 0

    def write(self, kind: str, **more: Any) -> None:
        record = {"uuid": str(uuid.uuid4()), "parentUuid": self.last, "sessionId": self.session,
                  "timestamp": _iso(time.time()), "type": kind, "cwd": self.cwd, "version": "0.24.4", **more}
        self.last = record["uuid"]
        with open(self.file, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def event(self, name: str) -> None:
        self.write("system", provenance="system", subtype="ui_telemetry", systemPayload={"uiEvent": {
            "event.name": name, "prompt_id": f"{self.session}########{self.prompts - 1}"}})

    def prompt(self, text: str, as_placeholder: bool) -> None:
        self.prompts += 1  # a placeholder is sent as the text it stands for
        self.write("user", provenance="real_user", message={"role": "user", "parts": [{"text": text}]})

    def waiting(self) -> None:
        self.event("qwen-code.api_response")
        call = {"functionCall": {"id": "call_1", "name": "run_shell_command", "args": {"command": "touch"}}}
        self.write("assistant", provenance="assistant_output", model="fake-model",
                   message={"role": "model", "parts": [call]})

    def answered(self, approved: bool) -> None:
        result = {"functionResponse": {"id": "call_1", "name": "run_shell_command",
                                       "response": {"output": "ok" if approved else "refused"}}}
        self.write("tool_result", provenance="tool_result", message={"role": "user", "parts": [result]})

    def answer(self, text: str) -> None:
        self.event("qwen-code.api_response")
        usage = {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110}
        self.write("assistant", provenance="assistant_output", model="fake-model",
                   message={"role": "model", "parts": [{"text": text}]}, usageMetadata=usage)


class PiFiles:
    """The session file under ``$PI_CODING_AGENT_DIR/sessions/--<cwd>--/``, made at the first prompt and not
    held open, as 1.6.0 and 0.73.1 write it (docs/agents.md, pi): the header, then ``message`` entries — the
    user's, then the assistant's with its ``stopReason`` (``toolUse`` while a tool runs, ``stop`` at the
    end), its usage and cost."""

    def __init__(self) -> None:
        from plugins.pi.resolve import folder_name

        self.cwd = os.getcwd()
        self.folder = Path(os.environ["PI_CODING_AGENT_DIR"]) / "sessions" / folder_name(self.cwd)
        self.file: Path | None = None
        self.parent: str | None = None

    def write(self, entry: dict[str, Any]) -> None:
        me = uuid.uuid4().hex[:8]
        record = {"type": "message", "id": me, "parentId": self.parent, "timestamp": _iso(time.time()),
                  **entry}
        self.parent = me
        assert self.file is not None
        with open(self.file, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def message(self, role: str, content: list[dict[str, Any]], **more: Any) -> None:
        stamp = int(time.time() * 1000)
        self.write({"message": {"role": role, "content": content, **more, "timestamp": stamp}})

    def prompt(self, text: str, as_placeholder: bool) -> None:
        if self.file is None:  # made at the first prompt
            session, now = str(uuid.uuid4()), time.time()
            self.folder.mkdir(parents=True, exist_ok=True)
            self.file = self.folder / f"{_iso(now).replace(':', '-').replace('.', '-')}_{session}.jsonl"
            header = {"type": "session", "version": 3, "id": session, "timestamp": _iso(now), "cwd": self.cwd}
            self.file.write_text(json.dumps(header) + "\n")
        self.message("user", [{"type": "text", "text": text}])  # a placeholder is sent as its text

    def said(self, content: list[dict[str, Any]], stop: str) -> None:
        cost = {"input": 0.0003, "output": 0.0003, "cacheRead": 0, "cacheWrite": 0, "total": 0.0006}
        usage = {"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 120,
                 "cost": cost}
        self.message("assistant", content, api="openai-completions", provider="fake", model="fake-model",
                     usage=usage, stopReason=stop)

    def waiting(self) -> None:
        """No question: the tool call is written, and the tool runs."""
        call = {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"command": "touch x"}}
        self.said([call], "toolUse")
        self.message("toolResult", [{"type": "text", "text": "ok"}], toolCallId="call_1", toolName="bash",
                     isError=False)

    def answer(self, text: str) -> None:
        self.said([{"type": "text", "text": text}], "stop")


class ClineFiles:
    """A session record ``sessions/<id>/<id>.json`` (``pid``, ``cwd``, ``status``) and its messages, as
    3.0.65 writes them (docs/agents.md, Cline), under ``$CLINE_DATA_DIR``: the record made at the first
    prompt, ``running`` from the submit, ``pending`` while a tool waits; the prompt (wrapped, line ends as
    ``\\r``) and the answer written to the messages at the turn's end, then ``idle``."""

    def __init__(self) -> None:
        self.cwd = os.getcwd()
        self.session = f"{int(time.time() * 1000)}_{uuid.uuid4().hex[:5]}"
        folder = Path(os.environ["CLINE_DATA_DIR"]) / "sessions" / self.session
        self.record_path, self.messages_path = folder / f"{self.session}.json", \
            folder / f"{self.session}.messages.json"
        self.started = _iso(time.time())
        self.messages: list[dict[str, Any]] = []
        self.prompt_text = ""

    def _record(self, status: str) -> None:
        self.record_path.parent.mkdir(parents=True, exist_ok=True)
        record = {"version": 1, "session_id": self.session, "source": "cli", "pid": os.getpid(),
                  "started_at": self.started, "status": status, "cwd": self.cwd,
                  "messages_path": str(self.messages_path)}
        _replace(self.record_path, json.dumps(record, indent=2))

    def prompt(self, text: str, as_placeholder: bool) -> None:
        self.prompt_text = text
        self._record("running")

    def waiting(self) -> None:
        self._record("pending")

    def answer(self, text: str) -> None:
        now = int(time.time() * 1000)
        wrapped = f'<user_input mode="act">{self.prompt_text.replace(chr(10), chr(13))}</user_input>'
        metrics = {"inputTokens": 100, "outputTokens": 20, "cacheReadTokens": 0, "cacheWriteTokens": 0}
        self.messages += [
            {"id": str(uuid.uuid4()), "role": "user", "ts": now,
             "content": [{"type": "text", "text": wrapped}]},
            {"id": f"msg_{uuid.uuid4().hex[:8]}", "role": "assistant", "ts": now, "metrics": metrics,
             "content": [{"type": "text", "text": text}],
             "modelInfo": {"id": "fake-model", "provider": "openai-compatible"}},
        ]
        _replace(self.messages_path, json.dumps({"version": 1, "agent": "lead", "sessionId": self.session,
                                                 "messages": self.messages}, indent=2))
        self._record("idle")


def _replace(path: Path, text: str) -> None:
    """Write ``path`` whole (Cline rewrites its files)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)



FILES = {
    "claude": ClaudeFiles,
    "codex": CodexFiles,
    "opencode": OpenCodeFiles,
    "gemini": GeminiFiles,
    "copilot": CopilotFiles,
    "qwen": QwenFiles,
    "pi": PiFiles,
    "pi-0.73.1": PiFiles,
    "cline": ClineFiles,
}


# ---- the terminal loop ----------------------------------------------------------------------------------


class Stand:
    """The stand-in's state: what scrolled by, what its input holds, busy or asking."""

    def __init__(self, agent: str, log: str, work_s: float) -> None:
        try:  # the pane's size, as the agents ask their terminal (not $COLUMNS, which a test run may set)
            size = os.get_terminal_size(sys.stdout.fileno())
        except OSError:
            size = shutil.get_terminal_size((120, 40))
        self.agent, self.look = agent, LOOKS[agent](size.columns)
        self.height = size.lines
        self.log, self.work_s = log, work_s
        self.files: Any = FILES[agent]()
        self.history: list[str] = [f" {self.look.comm} stand-in", ""]
        self.text = ""  # what the input holds: typed keys and pastes
        self.pastes: list[tuple[str, str]] = []  # (pasted text, placeholder) in the input now
        self.count = 0  # the session's placeholder pastes
        self.labels: list[str] = []  # the placeholders drawn since the last submit
        self.key_at = self.paste_at = 0.0  # when the last typed key and the last paste were taken

    def draw(self, *, busy: bool = False, dialog: int | None = None) -> None:
        bottom = self.look.dialog(dialog) if dialog is not None else self.look.input(self.draft_lines(), busy)
        rows = (self.history + bottom)[-self.height :]
        rows = [""] * (self.height - len(rows)) + rows
        sys.stdout.write("\x1b[H\x1b[2J" + "\r\n".join(rows))
        sys.stdout.flush()
        if dialog is None and self.look.moved:  # its input scrolled to the cursor a render later
            time.sleep(self.look.render_again_s)  # shapes the scenario: the agent's own second render
            self.draw(busy=busy)

    def draft_lines(self) -> list[str]:
        shown = self.text
        for text, mark in self.pastes:
            shown = shown.replace(text, mark, 1)
        return shown.split("\n") if shown else []

    def paste(self, text: str) -> None:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        count = self.count + 1
        if self.agent in ("gemini", "qwen"):  # they number the copies of one label in the input
            first = placeholder(self.agent, text, 1, self.height)
            # Qwen Code counts those a cleared input held too (recorded: paste_cases.json, line1001)
            marks = self.labels if self.agent == "qwen" else [mark for _, mark in self.pastes]
            count = 1 + sum(mark.split(" #")[0].rstrip("]") + "]" == first for mark in marks)
        elif self.agent == "pi":  # 1.x numbers the placeholders in the input (0.73.1: in the session)
            count = 1 + len(self.pastes)
        mark = placeholder(self.agent, text, count, self.height)
        if mark is not None:  # only placeholders are numbered
            self.count += 1
            self.pastes.append((text, mark))
            self.labels.append(mark)
        self.text += text

    def enter(self) -> None:
        """Enter: a submit, or (too soon after a key or a paste, for an agent that says so) a newline."""
        now = time.monotonic()
        if now - self.key_at <= self.look.fast_return_s or now - self.paste_at <= self.look.paste_return_s:
            self.text += "\n"
            self.key_at = now
            self.draw()
        else:
            self.submit()

    def submit(self) -> None:
        message, long_paste = self.text, bool(self.pastes)
        self.labels = []
        if self.look.fast_return_s:  # Gemini CLI submits its input trimmed (a newline an Enter left)
            message = message.strip()
        self.text, self.pastes = "", []
        if not message.strip():
            self.draw()
            return
        with open(self.log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"t": time.time(), "message": message}) + "\n")
        self.history += self.look.prompt_row(message)
        self.files.prompt(message, long_paste)
        self.draw(busy=True)
        approved = True
        if APPROVAL in message and not self.look.asks_before_tools:
            self.files.waiting()  # the tool just runs
        elif APPROVAL in message:
            self.files.waiting()
            approved = self.ask()
            if hasattr(self.files, "answered"):
                self.files.answered(approved)
            self.draw(busy=True)
        if approved:
            time.sleep(self.work_s)  # shapes the scenario: the agent works this long
        answer = f"{'answer to' if approved else 'refused'}: {message[:60]}".replace("\n", " ")
        self.files.answer(answer)
        self.history += self.look.answer_rows(answer)
        self.draw()
        self.note({"answer": answer})  # after the screen: a source test waits for this, then for idle


    def start(self, start_s: float) -> None:
        """The first screen: after ``start_s`` of a blank one (what was typed then dropped), the trust
        question first, for an agent that asks it in a folder with ``.pi/``."""
        if start_s:
            sys.stdout.write("\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J")
            sys.stdout.flush()
            time.sleep(start_s)  # shapes the scenario: the agent starts this long
            termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
            sys.stdout.write("\x1b[?25h")
        if self.look.asks_trust and Path(".pi").is_dir():
            self.ask()
        self.draw()

    def ask(self) -> bool:
        """The approval dialog until Enter takes a choice or Esc refuses; every key logged."""
        back, forth = ("Left", "Right") if self.look.across else ("Up", "Down")
        selected = 0
        while True:
            self.draw(dialog=selected)
            for key in _keys(os.read(sys.stdin.fileno(), 64)):
                self.note({"key": key})
                if key in (back, forth):
                    step = 1 if key == forth else -1
                    selected = (selected + step) % len(self.look.choices)
                elif key in ("Enter", "Escape") or key in self.look.answer_keys:
                    approved = self.look.answer_keys[key] if key in self.look.answer_keys else \
                        key == "Enter" and self.look.approves(self.look.choices[selected])
                    self.note({"approval": "approved" if approved else "denied"})
                    return approved

    def note(self, record: dict[str, Any]) -> None:
        with open(self.log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"t": time.time(), **record}) + "\n")


_ARROWS = {b"A": "Up", b"B": "Down", b"C": "Right", b"D": "Left"}


def _keys(data: bytes) -> list[str]:
    """The keys in one read of the terminal: arrows (``ESC [ A`` or ``ESC O A``), Enter, Esc, characters."""
    keys = []
    while data:
        if data[:1] == b"\x1b" and data[1:2] in (b"[", b"O") and data[2:3] in _ARROWS:
            keys.append(_ARROWS[data[2:3]])
            data = data[3:]
            continue
        byte, data = data[:1], data[1:]
        keys.append({b"\r": "Enter", b"\x1b": "Escape"}.get(byte, byte.decode("latin-1")))
    return keys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="agent_tui")
    ap.add_argument("--agent", choices=sorted(LOOKS), required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--work-s", type=float, default=0.2)
    ap.add_argument("--start-s", type=float)
    ap.add_argument("--deaf-s", type=float, default=0.0)
    args = ap.parse_args(argv)
    with open("/proc/self/comm", "w") as f:
        f.write(LOOKS[args.agent].comm)
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    sys.stdout.write("\x1b[?2004h")
    stand = Stand(args.agent, args.log, args.work_s)
    stand.start(LOOKS[args.agent].start_s if args.start_s is None else args.start_s)
    pending, pasting, pasted = b"", False, b""
    deaf_until = time.monotonic() + args.deaf_s
    try:
        while True:
            data = os.read(fd, 65536)
            if not data:
                return 0
            if time.monotonic() < deaf_until:
                continue  # dropped, the screen unchanged
            pending += data
            while pending:
                if pasting:
                    end = pending.find(PASTE_END)
                    if end < 0:
                        pasted, pending = pasted + pending, b""
                        break
                    stand.paste((pasted + pending[:end]).decode("utf-8", "replace"))
                    stand.paste_at = time.monotonic()
                    pending, pasting, pasted = pending[end + len(PASTE_END) :], False, b""
                    time.sleep(stand.look.paste_draw_s)  # shapes the scenario: the agent's own delay
                    stand.draw()
                    continue
                if pending.startswith(PASTE_START):
                    pending, pasting = pending[len(PASTE_START) :], True
                    continue
                if PASTE_START.startswith(pending):
                    break  # the rest of a start marker is still to come
                byte, pending = pending[:1], pending[1:]
                if byte == b"\r":
                    stand.enter()
                elif byte in (b"\x03", b"\x04"):
                    return 0
                elif byte == b"\x15":  # Ctrl-U: the input cleared
                    stand.text, stand.pastes = "", []
                    stand.draw()
                elif byte == b"\x1b":
                    pending = pending.lstrip(b"[O0123456789;ABCDHF~")
                elif byte >= b" " or byte == b"\n":
                    raw = byte
                    while pending and 0x80 <= pending[0] < 0xC0:
                        raw, pending = raw + pending[:1], pending[1:]
                    stand.text += raw.decode("utf-8", "replace")
                    stand.key_at = time.monotonic()
                    stand.draw()
    finally:
        sys.stdout.write("\x1b[?2004l")
        sys.stdout.flush()
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


if __name__ == "__main__":
    sys.exit(main())
