"""The router's join: answers of a join route's sources gathered into groups, one hand-off per group.

A route with a list in ``from:`` fires nothing for one answer. Each answer goes into its group (the
answers to one upstream turn, or, for turns a person started, the next turn of each source:
:mod:`pipeline.engine.join_journal`); once the group holds ``join:`` answers (``all``: every source;
``any``: one; N: N sources) it is handed on once, through the route's transform, with ``{response}`` the
whole group — each answer under a ``## <tile>`` heading in the order of ``from:`` — and ``{answers[x]}``
one of them. A source that answers twice within a group gives its last answer; answers to a group already
handed on are recorded (late), not handed on again. The hand-off's hop is one more than the highest of its
answers', and its key is ``route@<group>``.

``within:`` starts when a group gets its first answer; when it passes, ``on_timeout: hand-on`` hands on
what came (saying who did not answer), ``drop`` records the hand-off skipped as dropped. The deadlines are
in the journal: a restarted daemon times out what passed while it was down, and hands on every group that
was complete when it died (a group handed on already is not handed on again: its hand-off's state says so).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict
from functools import partial
from typing import Protocol

import anyio
from anyio.abc import ObjectSendStream

from pipeline.engine.config import Config, Route
from pipeline.engine.hops import HopLedger
from pipeline.engine.join_journal import Group, JoinBook
from pipeline.engine.journal import Journal
from pipeline.plugin.events import Completion, Prompt, Response, handoff_key
from pipeline.plugin.transforms import Usage

__all__ = ["JoinStage", "joined_text"]

log = logging.getLogger("batonpass")


class Decision(Protocol):
    """What the router decided for one target (:class:`pipeline.engine.stages.route.RouteDecision`)."""

    @property
    def route(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def prompt(self) -> Prompt | None: ...
    @property
    def state(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def usage(self) -> Usage | None: ...
    @property
    def branch(self) -> str: ...


class Decides(Protocol):
    """The router, as the join uses it: its filters and its transform call."""

    def why_not(self, route: Route, response: Response) -> str: ...

    async def decide_one(self, route: Route, target: str, branch: str, response: Response) -> Decision: ...


def joined_text(route: Route, group: Group) -> str:
    """Every answer of ``group`` under a ``## <tile>`` heading, in the order of ``from:``; a source that did
    not answer (the group timed out) says so under its heading."""
    parts = []
    for source in route.sources:
        answer = group.answers.get(source)
        if answer is not None:
            parts.append(f"## {source}\n\n{answer[2].strip()}")
        elif group.timed_out:
            parts.append(f"## {source}\n\n({source} did not answer within {route.within})")
    return "\n\n".join(parts)


class JoinStage:
    """The join routes of one config over one journal. ``take`` gathers an answer; ``run`` hands on the
    groups a restart found complete and times out the groups whose ``within:`` passed."""

    def __init__(self, config: Config, journal: Journal, router: Decides) -> None:
        self.routes = [r for r in config.routes if r.is_join]
        self.journal, self.router = journal, router
        self.book, self.hops = JoinBook(journal), HopLedger(journal)
        #: one group's hand-off at a time (an answer and a deadline may finish the same group)
        self._lock = anyio.Lock()
        self._wake = anyio.Event()

    async def take(self, response: Response) -> list[Prompt]:
        """Put ``response`` in its group of each join route it is a source of; the prompts of the groups
        it completed. Written to the journal before the caller marks the turn routed."""
        completion, prompts = response.completion, []
        for route in self.routes:
            if completion.tile not in route.sources:
                continue
            why_not = self.router.why_not(route, response)
            if why_not:
                log.info("route %s: turn %s of %s does not join: %s", route.label, completion.turn_id,
                         completion.tile, why_not)
                continue
            origin = await self.journal.until_read(partial(self.hops.origin, completion.tile,
                                                           completion.turn_id))
            group = await self.journal.until_done(partial(
                self.book.add_answer, route.label, ",".join(route.targets), route.sources, route.join_needs,
                route.within_s, origin, (completion.tile, completion.turn_id, completion.hop, response.text)))
            log.info("joining     %s@%s: %s (%s)", route.label, group.id, group.progress, group.state)
            if group.state == "complete":
                prompts += await self.hand_on(route, group.id)
            elif group.deadline is not None:
                self._wake.set()
        return prompts

    async def hand_on(self, route: Route, group_id: str) -> list[Prompt]:
        """The hand-off of a complete group, decided and journaled once: a branch whose hand-off is past
        ``pending`` (a run before decided it) is left to the dispatcher's recovery."""
        async with self._lock:
            group = await self.journal.until_read(partial(self.book.group, route.label, group_id))
            if group is None or group.state != "complete":
                return []
            turn = Completion(tile=",".join(route.sources), turn_id=group.id, hop=group.hop, at=group.started)
            branches = route.branches()
            await self.journal.until_done(partial(self.journal.record_pending, turn, [
                (route.label, target, branch) for target, branch in branches]))
            undecided = [(t, b) for t, b in branches if self._pending(handoff_key(route.label, group.id, b))]
            if route.on_timeout == "drop" and group.timed_out:
                why = f"dropped: within {route.within} passed; {', '.join(group.missing)} did not answer"
                log.info("dropped     %s@%s: %s", route.label, group.id, why)
                decided = [(None, route.label, t, "skipped", why, b) for t, b in undecided]
                await self.journal.until_done(partial(self.journal.record_routing, turn, decided))
                await self.journal.until_done(partial(self.book.finished, route.label, group.id, "dropped"))
                return []
            response = Response(completion=turn, text=joined_text(route, group), source="join",
                                answers={s: a[2] for s, a in group.answers.items()})
            decisions = [await self.router.decide_one(route, t, b, response) for t, b in undecided]
            await self.journal.until_done(partial(self.journal.record_routing, turn, [
                (d.prompt, d.route, d.target, d.state, d.reason, d.branch) for d in decisions]))
            for d in decisions:
                if d.usage is not None:
                    await self.journal.until_done(partial(
                        self.journal.record_usage, handoff_key(d.route, group.id, d.branch), asdict(d.usage)))
            await self.journal.until_done(partial(self.book.finished, route.label, group.id, "handed-on"))
            # typed only as journaled: a recovery that gave up on the pending hand-off meanwhile wins
            return [d.prompt for d in decisions
                    if d.prompt is not None and self._state(d.prompt.key) == d.state]

    def _state(self, key: str) -> str:
        record = self.journal.handoff(key)
        return "" if record is None else record.state

    def _pending(self, key: str) -> bool:
        return self._state(key) in ("", "pending")

    async def run(self, send: ObjectSendStream[Prompt]) -> None:
        """Hand on the groups a run before left complete, then time out each group when its ``within:``
        passes (the deadlines are the journal's: a restart keeps them). Runs until cancelled; ``send`` is
        the router's, closed by the router."""
        for group in await self.journal.until_read(partial(self.book.in_state, "complete")):
            for prompt in await self._finish(group):
                await send.send(prompt)
        while True:
            self._wake = anyio.Event()
            timed = [g for g in await self.journal.until_read(partial(self.book.in_state, "joining"))
                     if g.deadline is not None and self._route(g) is not None]
            now = time.time()
            for group in [g for g in timed if g.deadline is not None and g.deadline <= now]:
                for prompt in await self._time_out(group):
                    await send.send(prompt)
            deadlines = [g.deadline for g in timed if g.deadline is not None and g.deadline > now]
            with anyio.move_on_after(min(deadlines, default=math.inf) - now):
                await self._wake.wait()

    async def _time_out(self, group: Group) -> list[Prompt]:
        route = self._route(group)
        if route is None:
            return []
        timed_out = await self.journal.until_done(partial(self.book.time_out, route.label, group.id))
        if timed_out is None:
            return []  # it completed in between
        log.info("timed out   %s@%s after %s: %s (%s)", route.label, group.id, route.within, group.progress,
                 route.on_timeout)
        return await self.hand_on(route, group.id)

    async def _finish(self, group: Group) -> list[Prompt]:
        route = self._route(group)
        return [] if route is None else await self.hand_on(route, group.id)

    def _route(self, group: Group) -> Route | None:
        """The join route of ``group``, if routes.yaml still has it (a group of a removed route waits for a
        config that has it again)."""
        return next((r for r in self.routes if r.label == group.route), None)
