"""Stage 4: safe delivery of prompts into their target panes, queued per target, in order, once.

For each prompt the target's adapter is asked whether the pane can take it. ``busy`` or ``draft``: wait
(the user's own typing is never interleaved with ours). ``absent`` (the pane runs something other than the
tile's agent — typically a bare shell after the agent exited) or ``gone``: nothing is typed; the hand-off
is reported, kept, and retried with backoff until ``settings.give_up_s``. Once typed, a prompt is never
typed again: it ends ``delivered`` (the agent showed it started), ``unconfirmed`` or ``failed`` — and a
hand-off queued twice (two recoveries of it after a crash), or again once the journal has it final, is
typed once.

A route with ``max_per_hour`` that already typed that many hand-offs in the last hour holds the next one
(``held`` in the journal, logged once) until the oldest of them is an hour old: kept, never dropped, and
still held after a restart; so does a route a person holds (``baton hold``) until ``baton resume``. A held
route steps aside: its hand-offs wait in their order, and other routes' hand-offs to the same tile go on.
A hand-off awaiting a person (``gate: person``: :mod:`pipeline.engine.gate`) steps aside alone, until passed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from anyio.streams.memory import MemoryObjectReceiveStream

from pipeline.engine.context import look_again, pane_lookups_shared, readiness_check
from pipeline.engine.gate import Gate
from pipeline.engine.hops import HopLedger, origin_of
from pipeline.engine.journal import FINAL_STATES, MEMORY, Journal, is_fault
from pipeline.engine.notify import Notifier
from pipeline.engine.stages.submit import submit_paste, type_prompt
from pipeline.engine.tiles import TileRuntime
from pipeline.plugin.agents import AgentAdapter, TargetState
from pipeline.plugin.events import Delivery, DeliveryState, Prompt
from pipeline.system import proc
from pipeline.system.text import sanitize
from pipeline.system.tmux import PaneGone, ServerGone, TmuxError

__all__ = ["PromptDispatcher", "target_state"]

log = logging.getLogger("batonpass")

WAIT_TICK_S = 0.2
#: the window ``max_per_hour`` counts in
HOUR_S = 3600.0
#: what a target that cannot take a prompt yet is doing, for the log
_WAITS_FOR = {"busy": ("is busy (a turn runs, or it asks a person something)", "once it is free"),
              "draft": ("has a draft in its input (text not yet sent)", "once that draft is sent or cleared")}
#: after a restart, how long to wait before looking again for a prompt the target neither shows nor holds
RECHECK_S = 0.5
#: a held hand-off looks again at least this often (the journal may be changed under it, the clock set)
HOLD_TICK_S = 60.0
#: how often a held route's journal row is read again (only while one of its hand-offs waits)
HELD_ROUTE_TICK_S = 0.25


async def target_state(adapter: AgentAdapter) -> TargetState:
    """The dispatch rules (docs/agents.md), held by the engine for every adapter: ``gone`` when the pane (or
    its program) is gone, ``absent`` when the pane's process tree does not hold the tile's agent (a bare shell
    left by an agent that exited: a prompt typed there would run as commands); only then the adapter's own
    answer."""
    try:
        info = await adapter.ctx.pane()
    except (PaneGone, ServerGone):
        return "gone"
    if info.dead:
        return "gone"
    if adapter.process_names and proc.find_first(info.pid, adapter.claims_process) is None:
        return "absent"
    return await adapter.target_state()


def _take_ready(queue: MemoryObjectReceiveStream[Prompt], into: list[Prompt], room: int) -> bool:
    """Move what ``queue`` already holds to ``into`` (up to ``room`` in all: the rest stays in the queue,
    which holds its producers back), without waiting; False once the queue is closed."""
    while len(into) < room:
        try:
            into.append(queue.receive_nowait())
        except anyio.WouldBlock:
            return True
        except anyio.EndOfStream:
            return False
    return True


class PromptDispatcher:
    def __init__(self, tiles: dict[str, TileRuntime], hops: HopLedger, *, give_up_s: float = 600.0,
                 dry_run: bool = False, report: Callable[[Delivery], None] | None = None,
                 queue_size: int = 256, journal: Journal | None = None,
                 notifier: Notifier | None = None, limits: dict[str, int] | None = None,
                 gate: Gate | None = None) -> None:
        self.tiles, self.hops, self.give_up_s, self.dry_run = tiles, hops, give_up_s, dry_run
        #: each rate-limited route's max_per_hour, by route label
        self.limits = limits or {}
        self.journal = journal if journal is not None else Journal(MEMORY)
        self.notifier = notifier if notifier is not None else Notifier()
        self.gate = gate if gate is not None else Gate(self.journal)
        #: hand-offs a crash left with an unknown outcome: confirmed against the target before any retyping
        self.unsure: set[str] = set()
        self.report = report or (lambda delivery: None)
        self.queue_size = queue_size
        self._queues: dict[str, ObjectSendStream[Prompt]] = {}
        #: hand-offs whose route holds them, and by what ("person" or "rate"): said once, and once released
        self._held: dict[str, str] = {}
        #: the keys queued and not yet done with: a hand-off queued twice (two recoveries of it after a
        #: crash) is typed once
        self._queued: set[str] = set()

    async def run(self, receive: ObjectReceiveStream[Prompt]) -> None:
        async with receive, anyio.create_task_group() as tg:
            try:
                async for prompt in receive:
                    if prompt.key in self._queued:
                        log.info("queued      %s already; not queued twice", prompt.key)
                        continue
                    self._queued.add(prompt.key)
                    queue = self._queues.get(prompt.target)
                    if queue is None:
                        queue, queue_out = anyio.create_memory_object_stream[Prompt](self.queue_size)
                        self._queues[prompt.target] = queue
                        tg.start_soon(self._serve, prompt.target, queue_out)
                    log.info("queued      %s -> %s (route %s, hop %d)", prompt.source, prompt.target,
                             prompt.route, prompt.hop)
                    self.gate.arrived(prompt)
                    await queue.send(prompt)
            finally:
                for queue in self._queues.values():
                    await queue.aclose()

    async def _serve(self, target: str, queue: MemoryObjectReceiveStream[Prompt]) -> None:
        """Deliver ``target``'s hand-offs one at a time, in the order they came — except that a route held
        (by a person, or by its ``max_per_hour``) steps aside: its hand-offs wait, in their order, and the
        other routes' hand-offs to the same tile go on."""
        waiting: list[Prompt] = []  # taken from the queue, not yet delivered: in arrival order
        open_ = True
        async with queue:
            while waiting or open_:
                open_ = _take_ready(queue, waiting, self.queue_size) and open_
                if not waiting:
                    try:
                        waiting.append(await queue.receive())
                    except anyio.EndOfStream:
                        return
                    continue
                prompt, look_in = await self._first_free(waiting)
                if prompt is None:  # every waiting hand-off's route is held: a new one may not be
                    with anyio.move_on_after(look_in):
                        if len(waiting) >= self.queue_size or not open_:
                            await anyio.sleep(look_in)
                        try:
                            waiting.append(await queue.receive())
                        except anyio.EndOfStream:
                            open_ = False
                            await anyio.sleep(look_in)
                    continue
                waiting.remove(prompt)
                try:
                    if not await self._done_already(prompt):
                        await self._serve_one(prompt)
                finally:
                    self._queued.discard(prompt.key)

    async def _done_already(self, prompt: Prompt) -> bool:
        """Whether the journal has ``prompt``'s hand-off in a final state (a second recovery of it queued it
        again): once typed, a prompt is never typed again."""
        record = await self.journal.until_read(partial(self.journal.handoff, prompt.key))
        if record is None or record.state not in FINAL_STATES:
            return False
        log.info("%-11s %s already; not typed again", record.state, prompt.key)
        return True

    async def _first_free(self, waiting: list[Prompt]) -> tuple[Prompt | None, float]:
        """The first waiting hand-off whose route lets it go, or (None, when to look again). A held route's
        later hand-offs are not asked about: they stay behind its first one. One awaiting a person is stepped
        over alone (the gate also takes out of ``waiting`` what a person dropped, or expired)."""
        awaiting = await self.gate.sort(waiting)
        held: set[str] = set()
        look_in = HELD_ROUTE_TICK_S if awaiting else HOLD_TICK_S
        for prompt in waiting:
            if prompt.route in held or prompt.key in awaiting:
                continue
            wait = await self._held_for(prompt)
            if wait is None:
                return prompt, 0.0
            held.add(prompt.route)
            look_in = min(look_in, wait)
        return None, look_in

    async def _serve_one(self, prompt: Prompt) -> None:
        unsure = prompt.key in self.unsure
        while True:
            try:
                delivery = await self.deliver(prompt)
            except Exception as exc:  # a bug in one delivery must not stop the queue
                if is_fault(exc):  # the journal failed, before any key of this try: wait, try again
                    if unsure:
                        self.unsure.add(prompt.key)
                    await self.journal.recover(exc)
                    continue
                delivery = Delivery(prompt, "failed", error=f"{type(exc).__name__}: {exc}")
                log.error("failed      %s: %s", prompt.key, delivery.error)
            break
        if delivery.state != "dry-run":  # a journal that cannot take it holds the queue until it can
            await self.journal.until_done(partial(
                self.journal.set_state, prompt.key, delivery.state, error=delivery.error,
                pane=delivery.pane, note=delivery.note or None))
        if delivery.state == "failed":
            self.notifier.failed(prompt.key, prompt.route, prompt.target, delivery.error)
        self.report(delivery)

    async def deliver(self, prompt: Prompt) -> Delivery:
        adapter = self.tiles[prompt.target].adapter
        if self.dry_run:
            print(
                f"--- {prompt.route} (hop {prompt.hop}) -> {prompt.target} ---\n{sanitize(prompt.text)}\n---",
                flush=True,
            )
            return Delivery(prompt, "dry-run")
        with pane_lookups_shared():  # the pane asked of tmux once per readiness check, and for the paste
            return await self._deliver(prompt, adapter)

    async def _deliver(self, prompt: Prompt, adapter: AgentAdapter) -> Delivery:
        started = time.monotonic()
        if prompt.key in self.unsure:
            self.unsure.discard(prompt.key)
            outcome = await self._await_target(prompt, started, ("ready", "busy", "draft"))
            if isinstance(outcome, Delivery):
                return outcome
            settled = await self._settle_unsure(prompt, adapter)
            if settled is not None:
                return settled
        outcome = await self._await_target(prompt, started, ("ready",))
        if isinstance(outcome, Delivery):
            return outcome
        # journaled before the side effect: while the journal cannot take it, nothing is typed; once it
        # can, the target is looked at again (the wait may have been long)
        delivering = partial(self.journal.set_state, prompt.key, "delivering", attempt=True)
        while not self.journal.try_write(delivering):
            await self.journal.until_writable()
            outcome = await self._await_target(prompt, started, ("ready",))
            if isinstance(outcome, Delivery):
                return outcome
        attempts = outcome
        try:
            confirmed, pane_id = await type_prompt(adapter, prompt.text, on_submit=self._hop_expecter(prompt))
        except (TmuxError, ValueError) as exc:
            log.error("failed      %s -> %s: %s", prompt.key, prompt.target, exc)
            return Delivery(prompt, "failed", attempts=attempts + 1, error=str(exc))
        state: DeliveryState = "delivered" if confirmed else "unconfirmed"
        log.info(
            "%-11s %s -> %s (%s, hop %d, %d chars)",
            state,
            prompt.source,
            prompt.target,
            pane_id,
            prompt.hop,
            len(prompt.text),
        )
        return Delivery(prompt, state, pane=pane_id, attempts=attempts + 1)

    async def _held_for(self, prompt: Prompt) -> float | None:
        """None when ``prompt``'s route lets it go now; else how soon to ask again. Held by a person
        (``baton hold``: the journal's ``holds``) until resumed, or by the route's ``max_per_hour`` until the
        oldest hand-off of its hour is an hour old. A hold is journaled (``held``, with why) and logged once;
        its end, once."""
        if self.dry_run:
            return None
        person = (await self.journal.until_read(self.journal.holds)).get(prompt.route)
        said = self._held.get(prompt.key)
        if person is not None:
            if said != "person":
                who, at = person
                since = time.strftime("%H:%M:%S", time.localtime(at))
                why = f"route {prompt.route} held by {who} at {since}; it goes on baton resume {prompt.route}"
                log.warning("held        %s -> %s: %s", prompt.key, prompt.target, why)
                await self.journal.until_done(partial(self.journal.set_state, prompt.key, "held", note=why))
                self._held[prompt.key] = "person"
            return HELD_ROUTE_TICK_S
        limit = self.limits.get(prompt.route)
        now = time.time()
        typed = [] if limit is None else self.journal.typed_since(prompt.route, prompt.target, now - HOUR_S,
                                                                    but=prompt.key)
        if limit is not None and len(typed) >= limit:
            free_at = typed[len(typed) - limit] + HOUR_S  # when one fewer than the limit is left in the hour
            if said != "rate":
                n, goes = len(typed), time.strftime("%H:%M:%S", time.localtime(free_at))
                why = (f"held by max_per_hour={limit}: route {prompt.route} typed {n} "
                       f"hand-off{'s' * (n != 1)} in the last hour; it goes at {goes}")
                log.warning("held        %s -> %s: %s", prompt.key, prompt.target, why)
                self.journal.set_state(prompt.key, "held", note=why)
                self.notifier.kept(prompt.key, prompt.route, prompt.target, why)
                self._held[prompt.key] = "rate"
            return min(max(free_at - now, 0.01), HOLD_TICK_S)
        said = self._held.pop(prompt.key, None)
        if said == "person":
            log.info("resumed     %s -> %s", prompt.key, prompt.target)
            await self.journal.until_done(partial(self.journal.set_state, prompt.key, "transformed",
                                                  note=f"route {prompt.route} resumed"))
        elif said == "rate":  # released: it waits for its target like any other hand-off now
            self.journal.set_state(prompt.key, "transformed")
        return None

    async def _await_target(self, prompt: Prompt, started: float, wanted: tuple[str, ...]) -> int | Delivery:
        """Wait, in order, until the target's state is one of ``wanted``; returns how many times it was
        absent or gone, or the ``failed`` Delivery after ``give_up_s`` of that."""
        runtime = self.tiles[prompt.target]
        adapter = runtime.adapter
        attempts, backoff, said = 0, 1.0, ""
        while True:
            look_again()
            try:
                with readiness_check():
                    state = await target_state(adapter)
            except TmuxError as exc:
                state = "gone"
                runtime.ctx.forget_pane()
                log.debug("%s: %s", prompt.target, exc)
            if state in wanted:
                return attempts
            waited = time.monotonic() - started
            if state in ("busy", "draft"):
                if said != state:
                    why, until = _WAITS_FOR[state]
                    log.info("waiting     %s %s; hand-off %s is kept and typed %s", prompt.target, why,
                             prompt.key, until)
                    said = state
                await anyio.sleep(WAIT_TICK_S)
                continue
            attempts += 1
            reason = (
                f"pane {runtime.ctx.tile.pane} shows no {adapter.name} agent (a bare shell?); not typing "
                "there"
                if state == "absent"
                else f"pane {runtime.ctx.tile.pane} is gone"
            )
            if waited >= self.give_up_s:
                log.error(
                    "failed      %s -> %s: %s; gave up after %.0fs", prompt.key, prompt.target, reason, waited
                )
                return Delivery(prompt, "failed", attempts=attempts, error=reason)
            if said != reason:
                log.warning(
                    "kept        %s -> %s: %s; retrying with backoff", prompt.key, prompt.target, reason
                )
                self.notifier.kept(prompt.key, prompt.route, prompt.target, reason)
                said = reason
            await anyio.sleep(min(backoff, max(self.give_up_s - waited, 0.01)))
            backoff = min(backoff * 2, 30.0)

    async def _settle_unsure(self, prompt: Prompt, adapter: AgentAdapter) -> Delivery | None:
        """A crash left this hand-off ``delivering``: look before typing. Returns the outcome if the target
        settles it, or None when the prompt may be typed (again) once the target is ready.

        The run that died may have stopped anywhere between its paste and the agent's turn: the agent's
        records show the prompt (delivered); its input holds the paste, drawn as the text or as the
        agent's placeholder for it (press Enter once); it holds something else (a person's draft: kept
        until it is sent or cleared, then pasted); or nothing while the records say the prompt never
        arrived (pasted again). Never a second copy on top of anything."""
        clean = sanitize(prompt.text)
        received = await adapter.received(prompt.text)
        if received:
            log.info(
                "confirmed   %s: %s already shows it (typed before a restart)", prompt.key, prompt.target
            )
            return Delivery(prompt, "delivered", note="confirmed on the target after a restart")
        holds = await adapter.input_holds(clean)
        if holds == "prompt":
            return await self._submit_left_paste(prompt, adapter, clean)
        if received is None:
            log.warning("unconfirmed %s: cannot tell whether %s got it before a restart; not typing it again",
                        prompt.key, prompt.target)
            return Delivery(prompt, "unconfirmed", error="outcome unknown after a restart; not retyped")
        if holds == "other":
            why = (f"{prompt.target}'s input holds text that is not this hand-off (a person's draft?); "
                   "it is typed once that text is sent or cleared")
            log.warning("kept        %s -> %s: %s", prompt.key, prompt.target, why)
            self.notifier.kept(prompt.key, prompt.route, prompt.target, why)
            return None
        # empty, or not readable now (typed only once the target is ready: its input readable and empty).
        # The agent's records may lag the Enter by a moment: look once more before pasting again
        await anyio.sleep(RECHECK_S)
        if await adapter.received(prompt.text):
            log.info("confirmed   %s: %s shows it (typed before a restart)", prompt.key, prompt.target)
            return Delivery(prompt, "delivered", note="confirmed on the target after a restart")
        log.info("retyping    %s: %s neither shows it nor holds it (the run before died before its paste)",
                 prompt.key, prompt.target)
        return None

    def _hop_expecter(self, prompt: Prompt) -> Callable[[], None]:
        """What to do right before the Enter: expect the target's next turn to be this hop, answering this
        prompt's upstream turn (a join groups by it). A hop count is no reason to leave a paste without its
        Enter: a journal that cannot take it is logged, not raised."""
        def expect_hop() -> None:
            origin = origin_of(prompt.source, prompt.turn_id, prompt.hop)
            self.journal.try_write(partial(self.hops.expect, prompt.target, prompt.hop, origin))

        return expect_hop

    async def _submit_left_paste(self, prompt: Prompt, adapter: AgentAdapter, clean: str) -> Delivery:
        """The paste a dead run left in the target's input, unsubmitted: Enter once, as the run would have.
        Journaled first; a journal that cannot be written raises, and the delivery is tried again later."""
        self.journal.set_state(prompt.key, "delivering", attempt=True)  # before the side effect
        confirmed, pane_id = await submit_paste(adapter, clean, on_submit=self._hop_expecter(prompt))
        state: DeliveryState = "delivered" if confirmed else "unconfirmed"
        log.info("submitted   %s: the paste was waiting in %s's input (%s)", prompt.key, prompt.target, state)
        return Delivery(prompt, state, pane=pane_id, note="submitted a paste left by a crash")
