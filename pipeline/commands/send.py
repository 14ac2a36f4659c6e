"""``baton send``: one pane, typed into exactly as the daemon does (which pane and which agent:
:mod:`pipeline.cmdline.target`).

``send`` is the dispatcher's delivery: its checks (:func:`~pipeline.engine.stages.dispatch.target_state`:
gone, then no agent of that kind, then the adapter's own busy/draft) and its one way of typing
(:func:`~pipeline.engine.stages.dispatch.type_prompt`). A pane that is gone, runs no agent of the kind
expected (a bare shell would run the text as a command; a pane with no agent at all, when none is named),
is busy or holds a draft is refused: one line, exit 1, nothing typed. ``--wait SECONDS`` waits for a busy
agent or a draft as the dispatcher does. Only ``--force`` types into whatever runs there.

Each send that found its pane is journaled as a hand-off of route ``send`` (source ``send``, target the
tile's name or the ``%N``): ``failed`` with the reason when refused; when typed, recorded ``unconfirmed``
("stopped before it knew") *before* the paste — a send killed mid-way leaves that, never a hand-off the
daemon would type again after a restart — and then ``delivered`` or ``unconfirmed``. A journal that cannot
be written is said in one line and the send goes on: the record is history, not the delivery's guard.

Ctrl-C (exit 130) says in one line whether anything was typed. Once the paste has begun, a first Ctrl-C
lets the Enter that submits it go out (a paste is never left half done in an agent's input) and the turn's
confirmation end (at most the adapter's ``confirm_timeout_s``); a second one stops at once, saying what may
be left in the pane.

Text from outside (an argument, standard input, a file) is capped at
:data:`~pipeline.cmdline.options.MAX_INPUT_BYTES` before anything else happens, so a runaway pipe is refused
instead of filling a pane.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import anyio

from pipeline.cmdline.options import MAX_INPUT_BYTES, InputTooLarge, check_size, read_input
from pipeline.cmdline.target import Setup, TargetError, adapter_for, find_target, running_in, target_setup
from pipeline.engine.context import EngineContext, look_again, pane_lookups_shared, readiness_check
from pipeline.engine.journal import HandoffState, Journal, default_journal_path
from pipeline.engine.stages.dispatch import WAIT_TICK_S, target_state, type_prompt
from pipeline.plugin.agents import (
    AgentAdapter,
    TargetState,
)
from pipeline.plugin.events import Completion, Prompt
from pipeline.system.text import sanitize
from pipeline.system.tmux import PaneGone, TmuxError

__all__ = ["SEND_ROUTE", "RetryRecord", "SendRecord", "send_command", "send_text", "text_problem"]

#: the route (and source) a send is journaled under: ``baton history --route send``
SEND_ROUTE = "send"


class SendRecord:
    """The send's hand-off in the journal (route ``send``). A journal that cannot be written is said once
    and not tried again."""

    def __init__(self, turn_id: str | None = None) -> None:
        self.turn_id = turn_id or f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        self.key = f"{SEND_ROUTE}@{self.turn_id}"
        self._journal: Journal | None = None
        self._broken = False

    def start(self, target: str, text: str, state: HandoffState, why: str) -> None:
        """The record, in one transaction (``record_routing`` writes a hand-off in the state given)."""
        prompt = Prompt(SEND_ROUTE, SEND_ROUTE, target, text, self.turn_id, 0)
        self._write(lambda j: j.record_routing(Completion(tile=SEND_ROUTE, turn_id=self.turn_id),
                                               [(prompt, SEND_ROUTE, target, state, why)]))

    def end(self, state: HandoffState, *, note: str = "", error: str | None = None,
            pane: str | None = None) -> None:
        self._write(lambda j: j.set_state(self.key, state, note=note, error=error, pane=pane, attempt=True))

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()

    def _write(self, do: Callable[[Journal], None]) -> None:
        if self._broken:
            return
        try:
            if self._journal is None:
                self._journal = Journal()
            do(self._journal)
        except (sqlite3.Error, OSError) as exc:
            self._broken = True
            print(f"baton send: not recorded in the journal {default_journal_path()}: {exc}", file=sys.stderr)


class RetryRecord(SendRecord):
    """``baton retry``: the typing journaled on the failed hand-off's own row (``key``), not a new one."""

    def __init__(self, key: str, journal: Journal) -> None:
        super().__init__()
        self.key, self._journal, self.started = key, journal, False

    def start(self, target: str, text: str, state: HandoffState, why: str) -> None:
        self.started = True
        failed = state == "failed"
        self._write(lambda j: j.set_state(self.key, state, note=None if failed else why,
                                          error=why if failed else None))

    def close(self) -> None:
        """The journal is the caller's."""


@dataclass
class _Progress:
    """How far a send got, for what a Ctrl-C says."""

    #: the pane, once found (``%3 (tile rev)``)
    where: str = ""
    #: Ctrl-C presses seen
    presses: int = 0
    #: the shielded scope of the typing, once it began
    typing: anyio.CancelScope | None = None
    #: the Enter that submits the paste is on its way
    submitting: bool = False
    #: its outcome was said (the one line a Ctrl-C must not add to)
    said: bool = False
    #: where a refusal or failure is said (``baton send``: standard error), and the line saying it was sent
    say: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr))
    tell: Callable[[str], None] = field(default=print)

    def nothing_typed(self) -> str:
        return "baton send: interrupted; nothing was typed" + (f" into {self.where}" if self.where else "")


def send_command(args: argparse.Namespace) -> int:
    """``baton send``: 0 typed; 1 refused or failed (nothing typed, said in one line); 2 a contradicting
    ``--agent``; 130 Ctrl-C (one line says whether anything was typed)."""
    try:
        text = read_input(sys.stdin, "standard input") if args.text == "-" else args.text
        if args.text != "-":
            check_size(len(os.fsencode(args.text)), "the text")
    except InputTooLarge as exc:
        print(f"baton send: {exc}", file=sys.stderr)
        return 1
    problem = text_problem(text, "standard input" if args.text == "-" else "the text")
    if problem:
        print(f"baton send: {problem}", file=sys.stderr)
        return 1
    progress, record = _Progress(), SendRecord()
    try:
        setup = target_setup(args)
        if setup is None:
            return 1
        return anyio.run(lambda: _send_under_ctrl_c(args, text, setup, progress, record))
    except KeyboardInterrupt:  # before send listened for it, or after: nothing was typed unless it said so
        if not progress.said:
            print(progress.nothing_typed(), file=sys.stderr)
        return 130
    except TargetError as exc:
        print(f"baton send: {exc}", file=sys.stderr)
        return exc.status
    finally:
        record.close()


def text_problem(text: str, what: str = "the text") -> str | None:
    """Why ``text`` cannot be typed (empty, nothing printable), or None."""
    if not text.strip():
        return f"{what} is empty: nothing to type"
    if not sanitize(text).strip():
        return f"{what} holds nothing printable: nothing to type"
    return None


async def send_text(given: str, text: str, setup: Setup,
                    record: SendRecord | None = None) -> tuple[bool, str]:
    """``baton send GIVEN TEXT`` (no ``--wait``, no ``--force``) for an action
    (:mod:`pipeline.engine.actions`): the same checks, typing and journal, its outcome as (typed, one
    line) instead of printed. ``record`` journals it elsewhere than a new hand-off of route ``send``
    (``baton retry``: the hand-off's own row)."""
    problem = text_problem(text) if len(os.fsencode(text)) <= MAX_INPUT_BYTES else "the text is too long"
    if problem:
        return False, problem
    lines: list[str] = []
    progress = _Progress(say=lines.append, tell=lines.append)
    own = record is None
    record = record or SendRecord(f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{os.urandom(3).hex()}")
    args = argparse.Namespace(pane=given, agent="auto", wait=0.0, force=False)
    try:
        with pane_lookups_shared():
            status = await _send(args, text, setup, progress, record)
    except (TargetError, TmuxError) as exc:
        return False, str(exc)
    finally:
        if own:
            record.close()
    return status == 0, (lines[-1] if lines else "nothing said").removeprefix("baton send: ")


async def _send_under_ctrl_c(args: argparse.Namespace, text: str, setup: Setup, progress: _Progress,
                             record: SendRecord) -> int:
    status, error = 130, None
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_on_ctrl_c, signals, tg.cancel_scope, progress)
            try:
                with pane_lookups_shared():  # as the dispatcher: one pane lookup for its check and the paste
                    status = await _send(args, text, setup, progress, record)
            except Exception as exc:  # raised as itself, not in the task group's exception group
                error = exc
            tg.cancel_scope.cancel()
    if error is not None:
        raise error
    if progress.presses and not progress.said:  # stopped before anything was typed
        print(progress.nothing_typed(), file=sys.stderr)
        progress.said = True
    return status


async def _on_ctrl_c(signals: AsyncIterator[int], scope: anyio.CancelScope, progress: _Progress) -> None:
    """Before the paste, Ctrl-C stops the send; once it began, the paste and its Enter finish first
    (the typing is shielded); a second Ctrl-C stops that too."""
    async for _ in signals:
        progress.presses += 1
        if progress.typing is None:
            scope.cancel()
        elif progress.presses > 1:
            progress.typing.shield = False
            progress.typing.cancel()


async def _send(args: argparse.Namespace, text: str, setup: Setup, progress: _Progress,
                record: SendRecord) -> int:
    target = await find_target(args.pane, args.agent, setup, strict=True)
    ctx = EngineContext(name=target.name or target.given, tile=target.tile, tmux=setup.tmux)
    try:
        info = await ctx.pane()
    except PaneGone as exc:  # a tile's pane: say whose
        raise PaneGone(f"tile {target.name}: {exc}" if target.name else str(exc)) from None
    progress.where = where = target.where(info.pane_id)
    journaled = target.name or info.pane_id

    def refuse(why: str, hint: str = "") -> int:
        record.start(journaled, text, "failed", why)
        progress.said = True
        then = f"; {hint}" if hint else ""
        progress.say(f"baton send: not typing into {where}: {why}; nothing was typed{then}")
        return 1

    force = "--force types into whatever runs there"
    agent, running = running_in(info, setup.registries)
    expected = target.tile.agent
    if expected == "auto" and not agent and not args.force:
        return refuse(f"no agent runs there ({running}; a shell would run the text as a command)",
                      f"--agent NAME names the agent expected, {force}")
    adapter = adapter_for((agent or "terminal") if expected == "auto" else expected, ctx, setup.registries)
    state = await _ready(adapter, args.wait)
    if state == "absent":
        if not args.force:
            return refuse(f"no {adapter.name} agent runs there ({running})", force)
        adapter = adapter_for(agent or "terminal", ctx, setup.registries)
        state = await _ready(adapter, args.wait)
    if state == "gone":
        return refuse("the pane is gone (or its program exited)")
    if state in ("busy", "draft"):
        waited = f" after --wait {args.wait:g}s" if args.wait else ""
        for_whom = f" ({ctx.waiting_for})" if state == "busy" and ctx.waiting_for else ""
        doing = "is busy with a turn" if state == "busy" else "holds a draft in its input (a person typing?)"
        return refuse(f"the {adapter.name} agent {doing}{for_whom}{waited}",
                      "" if args.wait else "--wait SECONDS waits for it")
    return await _type(adapter, text, journaled, where, progress, record)


async def _ready(adapter: AgentAdapter, wait_s: float) -> TargetState:
    """The dispatcher's look at the target, again every tick while it is busy or holds a draft, for at
    most ``wait_s`` seconds."""
    deadline = time.monotonic() + wait_s
    while True:
        look_again()
        with readiness_check():
            state = await target_state(adapter)
        if state not in ("busy", "draft") or time.monotonic() >= deadline:
            return state
        await anyio.sleep(WAIT_TICK_S)


async def _type(adapter: AgentAdapter, text: str, journaled: str, where: str, progress: _Progress,
                record: SendRecord) -> int:
    """Type as the dispatcher does, journaled before the paste; the paste and its Enter shielded from
    the first Ctrl-C."""
    # true while it types (history -f shows it then) and after a crash that left it so
    record.start(journaled, text, "unconfirmed", "baton send is typing this; left so, it stopped before it "
                 "knew whether the agent took it")
    result: tuple[bool, str] | None = None
    with anyio.CancelScope(shield=True) as progress.typing:
        def submitting() -> None:
            progress.submitting = True
        try:
            result = await type_prompt(adapter, text, on_submit=submitting)
        except TmuxError as exc:
            record.end("failed", error=f"tmux: {exc}")
            progress.say(f"baton send: typing into {where} failed: {exc}")
            progress.said = True
            return 1
    if result is None:  # a second Ctrl-C cut the typing short
        submitted = "the text was pasted and its Enter sent or on its way; no turn seen yet: look at the pane"
        pasted = "the text may wait, unsubmitted, in its input: clear it or press Enter there"
        left = submitted if progress.submitting else pasted
        record.end("unconfirmed", note=f"baton send was interrupted while typing: {left}")
        progress.say(f"baton send: interrupted while typing into {where}: {left}")
        progress.said = True
        return 130
    confirmed, pane_id = result
    seen = "the agent started a turn" if confirmed else "the agent did not show a new turn yet"
    record.end("delivered" if confirmed else "unconfirmed", note="" if confirmed else seen, pane=pane_id)
    progress.said = True
    typed = sanitize(text)
    if progress.presses:
        print(f"baton send: interrupted after the text was typed into {where} and submitted (Enter): {seen}",
              file=sys.stderr)
        return 130
    removed = len(text) - len(typed)
    progress.tell(f"sent {len(typed)} chars to {pane_id} ({adapter.name}"
          + (f", tile {journaled}" if journaled != pane_id else "") + ")"
          + (f", {removed} control chars removed" if removed else "") + ": "
          + ("the agent started a turn" if confirmed else "typed; the agent did not show a new turn yet"))
    return 0
