"""The screen-reading adapter every built-in shares, public so that a third-party adapter gets what a built-in
gets: a turn ends when the agent's screen has been quiet for a while and shows no busy marker; the answer is
the ANSI-stripped text the turn printed, from the line where the turn began to the agent's input line,
without the echoed prompt; readiness, drafts and dialogs are read from the screen. An adapter that reads its
agent's files subclasses it and overrides what the files say better (docs/adapters.md).

Dialogs that wait for a person (a permission prompt) are read from the screen too: some agents record them in
their files (Claude Code's session file says ``waiting``); others do not (OpenCode's store, Codex's rollout),
and a screen-followed agent has no files at all. An adapter says how to recognise its dialogs
(:meth:`ScreenDialogs.waiting_for`), its follower tells the engine on every look
(:meth:`ScreenDialogs.look_for_person`, so the person is notified once per episode), ``baton status`` shows it
(:meth:`ScreenDialogs.waiting_step`), and ``target_state`` says ``busy`` while one shows: a hand-off typed
there would answer the dialog. What the dialog asks — its question and the command, as the agent draws them
(:meth:`ScreenDialogs.asks`) — is shown next to Approve and Deny, so that a person never approves blind.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, TypeVar

import anyio

from pipeline.plugin.agents import AgentAdapter, Emit, TargetState, TileContext
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.tools import proc, sanitize, strip_ansi
from pipeline.plugin.turns import ResolveStep, TurnMark
from pipeline.system.tmux import PaneGone, PaneInfo, ServerGone, TmuxError

__all__ = ["ScreenAdapter", "ScreenDialogs", "clean_turn_text", "is_furniture"]

log = logging.getLogger("batonpass")

T = TypeVar("T")


def clean_turn_text(captured: str, prompt: str | None, input_line: re.Pattern[str] | None,
                    *, drop_last: bool = False) -> str:
    """The answer part of what a turn printed.

    ``captured`` runs from the line where the turn began (the input line the prompt was typed on) to the
    cursor. The echoed prompt is cut (up to its last line when batonpass typed it, else the first line),
    and so are the trailing input line, the screen furniture around it and blank lines.
    """
    lines = strip_ansi(captured).rstrip("\n").split("\n")
    cut = 1
    if prompt:
        tail = next((ln.strip() for ln in reversed(prompt.split("\n")) if ln.strip()), "")
        window = prompt.count("\n") + 3
        for i, line in enumerate(lines[: window + 1]):
            if tail and line.rstrip().endswith(tail):
                cut = i + 1
                break
    lines = lines[cut:]
    if drop_last and lines:
        lines = lines[:-1]
    if input_line is not None:
        for i in range(len(lines) - 1, max(len(lines) - 8, -1), -1):
            if input_line.search(lines[i]):
                lines = lines[:i]
                break
    while lines and (not lines[-1].strip() or is_furniture(lines[-1])):
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines)


def is_furniture(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and set(stripped) <= set("─━-═│╭╮╰╯ ")


class ScreenDialogs:
    """Mixed into :class:`ScreenAdapter`: the screen's dialogs, for every adapter that reads a screen."""

    ctx: TileContext
    #: what the last :meth:`look_for_person` found the agent waits for (None: nothing)
    waiting_now: str | None = None

    def waiting_for(self, screen: str) -> str | None:
        """What ``screen`` shows the agent waits for a person for (``"permission prompt"``), or None.
        Agents that draw such dialogs override this; while one shows, the turn has not ended."""
        return None

    def asks(self, screen: str) -> str | None:
        """What the dialog on ``screen`` asks the person, as the agent draws it: its question and, on a
        second line, the command or tool it asks about (``Do you want to proceed?`` /
        ``Bash command: touch marker.txt``; :func:`pipeline.plugin.dialogs.asked` makes the text safe).
        None when no dialog shows, or this adapter cannot read its words (agents that draw dialogs
        override it, with :meth:`waiting_for`)."""
        return None

    async def asked_now(self) -> str | None:
        """What the dialog on the screen now asks (:meth:`asks`), or None (also when the pane cannot be
        read): ``baton status``'s ``waiting_for``, the board's and the page's line under a waiting tile."""
        try:
            return self.asks(await self.ctx.capture())
        except TmuxError:
            return None

    async def look_for_person(self) -> str | None:
        """Read the screen and tell the engine (``ctx.waiting``) whether a dialog waits for a person there;
        returns its reason, or None (also when the pane cannot be read)."""
        try:
            reason = self.waiting_for(await self.ctx.capture())
        except TmuxError:
            reason = None
        self.waiting_now = reason
        self.ctx.waiting(reason)
        return reason

    async def waiting_step(self) -> ResolveStep | None:
        """``baton status``'s ``activity`` step (``waiting (<reason>)``) while the screen shows a dialog."""
        try:
            reason = self.waiting_for(await self.ctx.capture())
        except TmuxError:
            return None
        return ResolveStep("activity", True, f"waiting ({reason})", reason) if reason else None


class ScreenAdapter(ScreenDialogs, AgentAdapter):
    """Any agent, read from its screen: the base every built-in adapter shares, and yours may. Subclasses
    name their busy markers, input line and dialogs, and override what their agent's files say better."""

    reads_screen = True
    #: text that shows only while the agent works
    busy_markers: ClassVar[tuple[str, ...]] = ()
    #: the agent's input line; group 1, when non-empty, is a draft the user is typing
    input_line: ClassVar[re.Pattern[str] | None] = None
    #: placeholder texts shown in an empty input line (not drafts)
    placeholders: ClassVar[tuple[str, ...]] = ()
    quiet_s: ClassVar[float] = 1.2
    tick_s: ClassVar[float] = 0.2
    #: while no turn runs and the screen stayed the same this long, it is looked at only every
    #: ``idle_tick_s`` (a turn that starts and ends between two looks is still seen: the screen moved)
    idle_after_s: ClassVar[float] = 5.0
    idle_tick_s: ClassVar[float] = 1.0
    #: an idle screen is captured only when tmux says its window printed since the last look — and at
    #: least this often, whatever tmux says (its record is the wall clock's, which can be set back)
    idle_capture_s: ClassVar[float] = 30.0

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._mark: int | None = None
        self._answers: dict[str, str] = {}
        self._in_turn = False
        #: the last prompt batonpass submitted here, and when (told by the engine: prompt_submitted)
        self.last_prompt: str | None = None
        self.prompt_sent_at = 0.0
        #: why the follower reads what it reads, as last logged (said once per change)
        self._said = ""
        #: set to have the screen follower look now instead of at its next beat
        self._nudge: anyio.Event | None = None

    def prompt_submitted(self, text: str, at: float) -> None:
        """The screen shows the prompt above the answer (cut from the turn's text), and a submit starts a
        turn even before the screen changes: the screen follower looks at once."""
        self.last_prompt, self.prompt_sent_at = text, at
        if self._nudge is not None:
            self._nudge.set()

    async def _next_look(self, idle: bool) -> bool:
        """Wait for the next look: on the same beat as every other screen-read tile (their looks go to tmux
        in one write), a slower one while the screen is idle, or at once when a prompt was submitted (then
        True: the look must capture the screen)."""
        tick = self.idle_tick_s if idle else self.tick_s
        if self._nudge is not None and self._nudge.is_set():  # submitted during the last look
            self._nudge = anyio.Event()
            return True
        nudge = self._nudge = self._nudge or anyio.Event()
        with anyio.move_on_after(tick - time.monotonic() % tick):
            await nudge.wait()
        if nudge.is_set():
            self._nudge = anyio.Event()
            return True
        return False

    async def _unchanged_since(self, looked_at: float, last_look: float) -> bool:
        """Whether an idle look may be skipped: tmux says the pane printed nothing since the last look
        (``looked_at``, epoch seconds) and ``idle_capture_s`` has not passed since it (``last_look``,
        monotonic)."""
        return (time.monotonic() - last_look < self.idle_capture_s
                and not await self.ctx.printed_since(looked_at))

    # ---- completion ------------------------------------------------------------------------------

    async def _look_once_pane_is_there(self, look: Callable[[], Awaitable[T]]) -> T:
        """What ``look`` finds, asked again every second while the pane or its tmux server is gone: a
        follower outlives its pane (the same name may come back, or the server restart)."""
        while True:
            try:
                return await look()
            except (PaneGone, ServerGone):
                await anyio.sleep(1.0)

    def _say(self, why: str) -> None:
        """Log why the follower reads the agent the way it does — once per change, not once per look."""
        if why and why != self._said:
            log.info("%s: %s", self.ctx.name, why)
        self._said = why

    async def follow(self, emit: Emit) -> None:
        last_screen, last_change, turn_began = "", time.monotonic(), 0.0
        last_end = looked_at = time.time()
        last_capture = float("-inf")
        while True:
            idle = not self._in_turn and time.monotonic() - last_change > self.idle_after_s
            nudged = await self._next_look(idle)
            if idle and not nudged and await self._unchanged_since(looked_at, last_capture):
                continue  # nothing printed since the last look: the same screen
            looked_at = time.time()
            try:
                info, screen = await self.ctx.pane_and_screen()
            except (PaneGone, ServerGone):
                await anyio.sleep(1.0)
                continue
            now = last_capture = time.monotonic()
            if self._mark is None:
                self._mark = info.cursor_line
            if screen != last_screen:
                last_screen, last_change = screen, now
            waiting = self.waiting_for(screen)
            self.ctx.waiting(waiting)
            busy = self.is_busy(screen) or waiting is not None  # a dialog is not the end of a turn
            if not self._in_turn:
                prompted = self.prompt_sent_at > last_end
                scrolled = info.cursor_line >= self._mark + 2 and now - last_change < self.quiet_s
                if busy or prompted or scrolled:
                    self._in_turn, turn_began = True, now
                continue
            if busy or now - last_change < self.quiet_s or now - turn_began < self.quiet_s:
                continue
            start, end = self._mark, info.cursor_line
            text = await self._turn_text(start)
            self._mark, self._in_turn, last_end = end, False, time.time()
            turn_id = f"screen:{info.pane_id}:{start}-{end}:{int(last_end)}"
            self._answers[turn_id] = text
            await emit(Completion(tile=self.ctx.name, turn_id=turn_id, signal="screen"))

    def is_busy(self, screen: str) -> bool:
        tail = "\n".join(screen.rstrip("\n").split("\n")[-12:])
        return any(marker in tail for marker in self.busy_markers)

    async def _turn_text(self, start: int) -> str:
        captured = await self.ctx.capture_from(start)
        return clean_turn_text(captured, self.last_prompt, self.input_line)

    async def response(self, completion: Completion) -> Response | None:
        text = self._answers.pop(completion.turn_id, None)
        if text is None:
            # asked as the fallback for another adapter's completion: what the screen shows since last time
            info = await self.ctx.pane()
            start = self._mark if self._mark is not None else max(info.cursor_line - info.height, 0)
            text = await self._turn_text(start)
            self._mark = info.cursor_line
        return Response(completion=completion, text=text, source="terminal")

    # ---- as a target -----------------------------------------------------------------------------

    async def target_state(self) -> TargetState:
        try:
            info = await self.ctx.pane()
            if info.dead:
                return "gone"
            if self.process_names and proc.find_first(info.pid, self.claims_process) is None:
                return "absent"
            screen = await self.ctx.capture()
        except (PaneGone, ServerGone):
            return "gone"
        if self.is_busy(screen) or self._in_turn or self.waiting_for(screen) is not None:
            return "busy"
        return "draft" if self.draft(screen) else "ready"

    async def presence_state(self, info: PaneInfo) -> TargetState:
        """An agent known by its screen alone (no process name) is there while its pane is: no tmux round
        trip (at 50 ``terminal`` tiles, the presence check's looks were 150 a second)."""
        return await self.target_state() if self.process_names else "ready"

    def draft(self, screen: str) -> str:
        """The text in the agent's input line, if the user left some there."""
        if self.input_line is None:
            return ""
        for line in reversed(screen.rstrip("\n").split("\n")[-12:]):
            m = self.input_line.search(line)
            if m:
                text = (m.group(1) or "").strip()
                return "" if any(text.startswith(p) for p in self.placeholders) else text
        return ""

    async def snapshot(self) -> TurnMark:
        return TurnMark(screen=await self.ctx.capture())

    async def current_draft(self) -> str:
        try:
            return self.draft(await self.ctx.capture())
        except TmuxError:
            return ""

    async def received(self, text: str) -> bool | None:
        """The prompt's last line on screen (or in recent scrollback) above the input line: typed and sent.
        Only in the input line: pasted but not submitted — not received."""
        tail = next((ln.strip() for ln in reversed(sanitize(text).split("\n")) if ln.strip()), "")
        if not tail:
            return None
        try:
            screen = strip_ansi(await self.ctx.capture(start=-500))
        except TmuxError:
            return None
        lines = screen.rstrip("\n").split("\n")
        if self.input_line is None:  # the input is read by draft(): its lines are not a prompt shown above
            shown = sum(ln.rstrip().endswith(tail) for ln in lines)
            return shown > any(ln.rstrip().endswith(tail) for ln in self.draft(screen).split("\n"))
        draft_at = next((i for i in range(len(lines) - 1, max(len(lines) - 12, -1), -1)
                         if self.input_line.search(lines[i])), len(lines))
        return any(ln.rstrip().endswith(tail) for ln in lines[:draft_at])

    async def turn_started(self, before: TurnMark) -> bool:
        try:
            screen = await self.ctx.capture()
        except TmuxError:
            return False
        return self.is_busy(screen) or screen != before.screen


