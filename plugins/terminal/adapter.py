"""The terminal adapters: the fallback that works for any agent, the ``shell`` tile, and ``amp``.

A generic agent completes a turn when its screen has been quiet for a while and shows no busy marker
(:class:`pipeline.plugin.screen.ScreenAdapter`); a shell completes one when it has no foreground job again.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any, ClassVar

import anyio

from pipeline.plugin import PaneGone, RegisterAgent, ServerGone, TurnMark
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
        was_busy, last_check, prompt_text, info = False, 0.0, None, None
        last_change = last_look = time.monotonic()
        looked_at = time.time()
        while True:
            if time.monotonic() - last_change > self.idle_after_s and info is not None:
                nudged = await self._next_look(True)
                if not nudged and await self._unchanged_since(looked_at, last_look):
                    continue  # a job starts from a typed or pasted command line, which is echoed
            else:
                await anyio.sleep(self.tick_s)
            now = time.monotonic()
            busy = proc.foreground_busy(info.pid) if info is not None else None
            if busy:
                was_busy = self._in_turn = True
                last_change = now
                continue
            if info is not None and busy is not None and not was_busy and now - last_check < self.recheck_s:
                continue
            last_check = last_look = now
            looked_at = time.time()  # what printed after this, a look on the idle beat must see
            try:
                info = await self.ctx.pane()
            except (PaneGone, ServerGone):
                info = None
                await anyio.sleep(1.0)
                continue
            busy = proc.foreground_busy(info.pid)
            if busy is None or busy:
                continue
            if self._mark is None or prompt_text is None:
                self._mark, prompt_text = info.cursor_line, await self._prompt_text(info)
                log.debug("%s: shell prompt %r on line %d; a command from here on is a turn", self.ctx.name,
                          prompt_text, self._mark)
                continue
            if info.cursor_line == self._mark:
                was_busy = self._in_turn = False
                continue
            last_change = now
            current = await self._prompt_text(info)
            if not was_busy and not (prompt_text and current.startswith(prompt_text)):
                continue  # the line moved without a new prompt: a long draft wrapping, not a turn
            start, end = self._mark, info.cursor_line
            captured = await self.ctx.capture_from(start)
            lines = strip_ansi(captured).split("\n")
            command = lines[0][len(prompt_text):].strip() if lines else ""
            text = clean_turn_text(captured, None, None, drop_last=True)
            self._mark, self._in_turn, was_busy, prompt_text = end, False, False, current or prompt_text
            if not command and not text:
                continue  # Enter on an empty line
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
