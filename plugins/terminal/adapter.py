"""The terminal adapters: the fallback that works for any agent, the ``shell`` tile, and ``amp``.

A generic agent completes a turn when its screen has been quiet for a while and shows no busy marker; a
shell completes one when it has no foreground job again. The response is the ANSI-stripped text the turn
printed, from the line where the turn began to the agent's input line, without the echoed prompt.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import anyio

from pipeline.plugin import PaneGone, PaneInfo, RegisterAgent, ServerGone, TmuxError, TurnMark
from pipeline.plugin.agents import AgentAdapter, Emit, TargetState
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.tools import proc, sanitize, strip_ansi
from plugins.terminal.dialogs import ScreenDialogs

__all__ = ["AmpAdapter", "ShellAdapter", "TerminalAdapter", "clean_turn_text"]

log = logging.getLogger("batonpass")

T = TypeVar("T")

#: how many lines above the cursor a shell tile's last command is looked for
SHELL_LOOKBACK = 500


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
    while lines and (not lines[-1].strip() or _furniture(lines[-1])):
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines)


def command_on(line: str, prompt: str) -> str | None:
    """The command on a shell's prompt line, or None when ``line`` is no prompt line.

    A command typed before the shell drew its prompt is echoed twice on one line — once by the terminal,
    then after the prompt by the shell (``echo hi$ echo hi``): that is a prompt line too.
    """
    if line.startswith(prompt.rstrip()):
        return line[len(prompt.rstrip()):].strip()
    before, sep, after = line.partition(prompt) if prompt.strip() else ("", "", "")
    if sep and before.strip() and before.strip() == after.strip():
        return after.strip()
    return None


def _furniture(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and set(stripped) <= set("─━-═│╭╮╰╯ ")


class TerminalAdapter(ScreenDialogs, AgentAdapter):
    """Any agent, read from its screen. Subclasses name their busy markers, input line and dialogs."""

    name = "terminal"
    summary = "any program, from its screen: quiet and no busy marker = done"
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
            if self.process_names and proc.find_agent(info.pid, self.process_names) is None:
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


@dataclass
class _ShellWatch:
    """What :meth:`ShellAdapter.follow` carries from one look to the next (monotonic times, except
    ``looked_at``: wall time, as tmux reports window activity)."""

    last_change: float
    last_look: float
    looked_at: float
    was_busy: bool = False
    last_check: float = 0.0
    prompt_text: str | None = None
    info: PaneInfo | None = None


class ShellAdapter(TerminalAdapter):
    """A shell: one command is one turn, done when the shell has no foreground job again."""

    name = "shell"
    summary = "a shell tile: a command is a turn, done when no foreground job is left"
    submit_delay_s = 0.05
    tick_s = 0.05
    #: how often to look for a turn too short to be seen busy (its output moved the prompt down)
    recheck_s: ClassVar[float] = 0.4

    async def follow(self, emit: Emit) -> None:
        """Every tick reads only /proc (the shell's foreground process group); tmux is asked for the
        cursor only when a job just ended, or every ``recheck_s`` for a command too quick to be seen.
        A shell left at its prompt for ``idle_after_s`` is looked at on the idle beat instead, and only
        when tmux says its window printed since the last look (or ``idle_capture_s`` passed); a job it
        then finds running, or a moved prompt, brings back the quick beat."""
        now = time.monotonic()
        st = _ShellWatch(last_change=now, last_look=now, looked_at=time.time())
        while True:
            if not await self._tick(st):
                continue  # a job starts from a typed or pasted command line, which is echoed
            now = time.monotonic()
            if self._busy_or_too_soon(st, now):
                continue
            st.last_check = st.last_look = now
            st.looked_at = time.time()  # what printed after this, a look on the idle beat must see
            try:
                st.info = await self.ctx.pane()
            except (PaneGone, ServerGone):
                st.info = None
                await anyio.sleep(1.0)
                continue
            await self._look_at_prompt(st, st.info, now, emit)

    async def _tick(self, st: _ShellWatch) -> bool:
        """Wait for the next look: the quick beat, or for a shell idle at its prompt the idle beat. False
        when the idle beat finds nothing printed since the last look (nothing to look at)."""
        if time.monotonic() - st.last_change > self.idle_after_s and st.info is not None:
            nudged = await self._next_look(True)
            return nudged or not await self._unchanged_since(st.looked_at, st.last_look)
        await anyio.sleep(self.tick_s)
        return True

    def _busy_or_too_soon(self, st: _ShellWatch, now: float) -> bool:
        """From /proc alone: a job runs (a turn is on), or no job ended and the recheck is not due."""
        busy = proc.foreground_busy(st.info.pid) if st.info is not None else None
        if busy:
            st.was_busy = self._in_turn = True
            st.last_change = now
            return True
        no_job_ended = st.info is not None and busy is not None and not st.was_busy
        return no_job_ended and now - st.last_check < self.recheck_s

    async def _look_at_prompt(self, st: _ShellWatch, info: PaneInfo, now: float, emit: Emit) -> None:
        """The shell is at a prompt: a first prompt sets the mark; a new prompt below the mark ends a
        turn (a line that moved with no new prompt is a long draft wrapping, not a turn)."""
        busy = proc.foreground_busy(info.pid)
        if busy is None or busy:
            return
        if self._mark is None or st.prompt_text is None:
            self._mark, st.prompt_text = info.cursor_line, await self._prompt_text(info)
            log.debug("%s: shell prompt %r on line %d; a command from here on is a turn", self.ctx.name,
                      st.prompt_text, self._mark)
            return
        if info.cursor_line == self._mark:
            st.was_busy = self._in_turn = False
            return
        st.last_change = now
        current = await self._prompt_text(info)
        if st.was_busy or (st.prompt_text and current.startswith(st.prompt_text)):
            await self._end_turn(st, info, current, emit)

    async def _end_turn(self, st: _ShellWatch, info: PaneInfo, current: str, emit: Emit) -> None:
        """Cut the command and its output from the mark to the new prompt and emit it as a turn."""
        prompt_text = st.prompt_text or ""
        start, end = self._mark, info.cursor_line
        assert start is not None
        captured = await self.ctx.capture_from(start)
        lines = strip_ansi(captured).split("\n")
        command = lines[0][len(prompt_text):].strip() if lines else ""
        text = clean_turn_text(captured, None, None, drop_last=True)
        self._mark, self._in_turn, st.was_busy, st.prompt_text = end, False, False, current or prompt_text
        if not command and not text:
            return  # Enter on an empty line
        turn_id = f"shell:{info.pane_id}:{start}-{end}"
        self._answers[turn_id] = text
        await emit(Completion(tile=self.ctx.name, turn_id=turn_id, signal="process", detail=command))

    async def last_response(self) -> Response | None:
        """The output of the last command on screen, cut as :meth:`follow` cuts a turn (``baton status``
        and ``baton preview`` then show what ``run`` handed on, not the screen's tail). None when the
        shell is running something or no earlier prompt line is in reach."""
        info = await self.ctx.pane()
        if proc.foreground_busy(info.pid):
            return None
        prompt = await self._prompt_text(info)
        if not prompt.strip():
            return None
        lines = (
            strip_ansi(await self.ctx.capture_from(info.cursor_line - SHELL_LOOKBACK))
            .rstrip("\n")
            .split("\n")
        )
        # a block runs from one prompt line to the next; an Enter on an empty line makes an empty block
        end = len(lines) - 1
        for i in range(len(lines) - 2, -1, -1):
            command = command_on(lines[i], prompt)
            if command is None:
                continue
            text = clean_turn_text("\n".join(lines[i:end + 1]), None, None, drop_last=True)
            end = i
            if text or command:
                completion = Completion(
                    tile=self.ctx.name, turn_id=f"shell:{info.pane_id}:last", signal="screen", detail=command
                )
                return Response(completion=completion, text=text, source="terminal")
        return None

    async def _prompt_text(self, info: Any) -> str:
        line = await self.ctx.tmux.capture(info.pane_id, start=info.cursor_y, end=info.cursor_y)
        return strip_ansi(line).rstrip("\n")[: info.cursor_x]

    async def target_state(self) -> TargetState:
        info = await self.live_pane()
        if info is None:
            return "gone"
        busy = proc.foreground_busy(info.pid)
        return "gone" if busy is None else ("busy" if busy else "ready")

    async def snapshot(self) -> TurnMark:
        return TurnMark(cursor=(await self.ctx.pane()).cursor_line)

    async def turn_started(self, before: TurnMark) -> bool:
        info = await self.ctx.pane()
        return bool(proc.foreground_busy(info.pid)) or info.cursor_line != before.cursor


class AmpAdapter(TerminalAdapter):
    """amp (Sourcegraph): found by process name (``amp``), read from its screen.

    While amp works, the bottom of its screen shows a spinner with ``Esc to cancel``; while it waits, its
    input box with the ``>`` prompt as its last line (box borders aside). So a turn is busy while a busy
    marker shows in the bottom lines, or — once the prompt has been seen at all — while the prompt is not
    the last line (a screen redrawn mid-answer is not idle). Words like "Running" are not markers: an
    answer may end with them.
    """

    name = "amp"
    summary = "Sourcegraph amp, from its screen (busy: Esc to cancel; idle: its > prompt)"
    process_names = frozenset({"amp"})
    busy_markers = ("Esc to cancel", "esc to cancel", "Esc to interrupt", "esc to interrupt")
    input_line = re.compile(r"^\s*[│┃]?\s*>\s?(.*?)\s*[│┃]?\s*$")

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._seen_prompt = False

    def is_busy(self, screen: str) -> bool:
        if super().is_busy(screen):
            return True
        lines = [ln for ln in strip_ansi(screen).split("\n") if ln.strip() and not _furniture(ln)]
        prompt = bool(lines) and self.input_line is not None and bool(self.input_line.search(lines[-1]))
        self._seen_prompt = self._seen_prompt or prompt
        return self._seen_prompt and not prompt


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(TerminalAdapter)
    register(ShellAdapter)
    register(AmpAdapter)
