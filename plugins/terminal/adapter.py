"""The terminal adapters: the fallback that works for any agent, the ``shell`` tile, and ``amp``.

A generic agent completes a turn when its screen has been quiet for a while and shows no busy marker
(:class:`pipeline.plugin.screen.ScreenAdapter`); a shell completes one when it has no foreground job again.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import anyio

from pipeline.plugin import PaneGone, PaneInfo, RegisterAgent, ServerGone, TurnMark
from pipeline.plugin.agents import Emit, TargetState
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.screen import ScreenAdapter, clean_turn_text, is_furniture
from pipeline.plugin.tools import proc, strip_ansi

__all__ = ["AmpAdapter", "ShellAdapter", "TerminalAdapter", "command_on"]

log = logging.getLogger("batonpass")

#: how many lines above the cursor a shell tile's last command is looked for
SHELL_LOOKBACK = 500


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


class TerminalAdapter(ScreenAdapter):
    """Any agent, read from its screen: the fallback for agents no adapter knows."""

    name = "terminal"
    summary = "any program, from its screen: quiet and no busy marker = done"


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


class ShellAdapter(ScreenAdapter):
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
        line = await self.ctx.capture(start=info.cursor_y, end=info.cursor_y)
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


class AmpAdapter(ScreenAdapter):
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
        lines = [ln for ln in strip_ansi(screen).split("\n") if ln.strip() and not is_furniture(ln)]
        prompt = bool(lines) and self.input_line is not None and bool(self.input_line.search(lines[-1]))
        self._seen_prompt = self._seen_prompt or prompt
        return self._seen_prompt and not prompt


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(TerminalAdapter)
    register(ShellAdapter)
    register(AmpAdapter)
