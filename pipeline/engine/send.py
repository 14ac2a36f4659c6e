"""Typing a person's text into one tile, as the dispatcher types: ``baton send``, the web page's Send and
``baton retry`` all come here (the commands are fronts over it: :mod:`pipeline.commands.send`,
:mod:`pipeline.engine.actions`).

The dispatcher's checks (:func:`~pipeline.engine.stages.dispatch.target_state`: gone, then no agent of that
kind, then the adapter's own busy/draft) and its one way of typing
(:func:`~pipeline.engine.stages.submit.type_prompt`). A pane that is gone, runs no agent of the kind
expected (a bare shell would run the text as a command; a pane with no agent at all, when none is named),
is busy or holds a draft is refused: one line, nothing typed. ``wait`` waits for a busy agent or a draft as
the dispatcher does; only ``force`` types into whatever runs there. What it leaves in the journal:
:mod:`pipeline.engine.send_record`.

Once the paste has begun it is shielded from cancellation (a paste is never left half done in an agent's
input): a first interrupt lets the Enter go out and the turn's confirmation end; a second one
(:attr:`Progress.typing` cancelled unshielded) stops at once, saying what may be left in the pane.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import anyio

from pipeline.engine.context import EngineContext, look_again, pane_lookups_shared, readiness_check
from pipeline.engine.pane_target import Setup, TargetError, adapter_for, find_target, running_in
from pipeline.engine.send_record import SendRecord
from pipeline.engine.stages.dispatch import WAIT_TICK_S, target_state
from pipeline.engine.stages.submit import type_prompt
from pipeline.plugin.agents import AgentAdapter, TargetState
from pipeline.system.text import MAX_TEXT_BYTES, sanitize
from pipeline.system.tmux import PaneGone, TmuxError

__all__ = ["Progress", "SendAsk", "Sent", "send", "send_text", "text_problem"]

#: how a send ended: typed (submitted), refused (nothing typed), failed (typing failed), interrupted
Sent = Literal["typed", "refused", "failed", "interrupted"]


@dataclass(frozen=True)
class SendAsk:
    """What was asked: the tile or pane, the agent expected there (``auto``: the tile's, else found), how
    long to wait for a busy agent or a draft, and whether to type into whatever runs there."""

    given: str
    agent: str = "auto"
    wait: float = 0.0
    force: bool = False


@dataclass
class Progress:
    """How far a send got (for what an interrupt says), and where its lines go."""

    #: where a refusal or failure is said, and where the line saying it was sent
    to_err: Callable[[str], None]
    to_out: Callable[[str], None]
    #: the pane, once found (``%3 (tile rev)``)
    where: str = ""
    #: interrupts seen (the command counts its Ctrl-C presses here)
    presses: int = 0
    #: the shielded scope of the typing, once it began
    typing: anyio.CancelScope | None = None
    #: the Enter that submits the paste is on its way
    submitting: bool = False
    #: the text was pasted and submitted
    typed: bool = False
    #: the last line said (the outcome, once :attr:`said`)
    line: str = field(default="")
    #: its outcome was said (the one line an interrupt must not add to)
    said: bool = False

    def say(self, line: str) -> None:
        self.line, self.said = line, True
        self.to_err(line)

    def tell(self, line: str) -> None:
        self.line, self.said = line, True
        self.to_out(line)


def text_problem(text: str, what: str = "the text") -> str | None:
    """Why ``text`` cannot be typed (empty, nothing printable, too long), or None."""
    if not text.strip():
        return f"{what} is empty: nothing to type"
    if len(os.fsencode(text)) > MAX_TEXT_BYTES:
        return f"{what} is too long"
    if not sanitize(text).strip():
        return f"{what} holds nothing printable: nothing to type"
    return None


async def send_text(given: str, text: str, setup: Setup,
                    record: SendRecord | None = None) -> tuple[bool, str]:
    """A send for an action (:mod:`pipeline.engine.actions`: no wait, no force), its outcome as (typed, one
    line). ``record`` journals it elsewhere than a new hand-off of route ``send`` (``baton retry``: the
    hand-off's own row)."""
    problem = text_problem(text)
    if problem:
        return False, problem
    lines: list[str] = []
    progress = Progress(to_err=lines.append, to_out=lines.append)
    own = record is None
    record = record or SendRecord()
    try:
        with pane_lookups_shared():
            sent = await send(SendAsk(given), text, setup, progress, record)
    except (TargetError, TmuxError) as exc:
        return False, str(exc)
    finally:
        if own:
            record.close()
    return sent == "typed", progress.line or "nothing said"


async def send(ask: SendAsk, text: str, setup: Setup, progress: Progress, record: SendRecord) -> Sent:
    """Find the pane, check it as the dispatcher does, type. Raises
    :class:`~pipeline.engine.pane_target.TargetError` and :class:`~pipeline.system.tmux.TmuxError` (no such
    tile or pane, a contradicting agent) before anything is recorded."""
    target = await find_target(ask.given, ask.agent, setup, strict=True)
    ctx = EngineContext(name=target.name or target.given, tile=target.tile, tmux=setup.tmux)
    try:
        info = await ctx.pane()
    except PaneGone as exc:  # a tile's pane: say whose
        raise PaneGone(f"tile {target.name}: {exc}" if target.name else str(exc)) from None
    progress.where = where = target.where(info.pane_id)
    journaled = target.name or info.pane_id

    def refuse(why: str, hint: str = "") -> Sent:
        record.refused(journaled, why)
        then = f"; {hint}" if hint else ""
        progress.say(f"not typing into {where}: {why}; nothing was typed{then}")
        return "refused"

    force = "--force types into whatever runs there"
    agent, running = running_in(info, setup.registries)
    expected = target.tile.agent
    if expected == "auto" and not agent and not ask.force:
        return refuse(f"no agent runs there ({running}; a shell would run the text as a command)",
                      f"--agent NAME names the agent expected, {force}")
    adapter = adapter_for((agent or "terminal") if expected == "auto" else expected, ctx, setup.registries)
    state = await _ready(adapter, ask.wait)
    if state == "absent":
        if not ask.force:
            return refuse(f"no {adapter.name} agent runs there ({running})", force)
        adapter = adapter_for(agent or "terminal", ctx, setup.registries)
        state = await _ready(adapter, ask.wait)
    if state == "gone":
        return refuse("the pane is gone (or its program exited)")
    if state in ("busy", "draft"):
        waited = f" after --wait {ask.wait:g}s" if ask.wait else ""
        for_whom = f" ({ctx.waiting_for})" if state == "busy" and ctx.waiting_for else ""
        doing = "is busy with a turn" if state == "busy" else "holds a draft in its input (a person typing?)"
        return refuse(f"the {adapter.name} agent {doing}{for_whom}{waited}",
                      "" if ask.wait else "--wait SECONDS waits for it")
    return await _type(adapter, text, journaled, progress, record)


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


async def _type(adapter: AgentAdapter, text: str, journaled: str, progress: Progress,
                record: SendRecord) -> Sent:
    """Type as the dispatcher does, journaled before the paste; the paste and its Enter shielded from
    the first interrupt."""
    # true while it types (history -f shows it then) and after a crash that left it so
    record.start(journaled, text, "unconfirmed", "baton send is typing this; left so, it stopped before it "
                 "knew whether the agent took it")
    where = progress.where
    result: tuple[bool, str] | None = None
    with anyio.CancelScope(shield=True) as progress.typing:
        def submitting() -> None:
            progress.submitting = True
        try:
            result = await type_prompt(adapter, text, on_submit=submitting)
        except TmuxError as exc:
            record.end("failed", error=f"tmux: {exc}")
            progress.say(f"typing into {where} failed: {exc}")
            return "failed"
    if result is None:  # a second interrupt cut the typing short
        submitted = "the text was pasted and its Enter sent or on its way; no turn seen yet: look at the pane"
        pasted = "the text may wait, unsubmitted, in its input: clear it or press Enter there"
        left = submitted if progress.submitting else pasted
        record.end("unconfirmed", note=f"baton send was interrupted while typing: {left}")
        progress.say(f"interrupted while typing into {where}: {left}")
        return "interrupted"
    confirmed, pane_id = result
    progress.typed = True
    seen = "the agent started a turn" if confirmed else "the agent did not show a new turn yet"
    record.end("delivered" if confirmed else "unconfirmed", note="" if confirmed else seen, pane=pane_id)
    if progress.presses:
        progress.say(f"interrupted after the text was typed into {where} and submitted (Enter): {seen}")
        return "interrupted"
    typed = sanitize(text)
    removed = len(text) - len(typed)
    progress.tell(f"sent {len(typed)} chars to {pane_id} ({adapter.name}"
                  + (f", tile {journaled}" if journaled != pane_id else "") + ")"
                  + (f", {removed} control chars removed" if removed else "") + ": "
                  + (seen if confirmed else f"typed; {seen}"))
    return "typed"
