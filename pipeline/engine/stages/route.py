"""Stage 3: answer → prompts. Route matching, the transform call, and hop accounting.

A route fires when its ``from`` tile finished a turn with an outcome its ``on`` accepts and (if set) its
``match`` regex is found in the answer. A turn that is already ``max_hops`` automatic hand-offs deep
fires nothing: that is how loops between agents end.
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass
from functools import partial

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from pipeline.engine.config import Config, Route
from pipeline.engine.journal import MEMORY, Journal
from pipeline.engine.notify import Notifier
from pipeline.engine.stages.join import JoinStage
from pipeline.engine.tiles import TileRuntime
from pipeline.plugin.events import Prompt, Response, handoff_key
from pipeline.plugin.registry import TransformRegistry
from pipeline.plugin.transforms import (
    Candidate,
    Transform,
    TransformInput,
    TransformResult,
    TransformSkipped,
    Usage,
)

__all__ = ["PromptRouter", "RouteDecision"]

log = logging.getLogger("batonpass")


@dataclass(frozen=True)
class RouteDecision:
    route: str
    target: str
    prompt: Prompt | None
    state: str  # transformed | awaiting (a person's gate) | skipped | failed
    reason: str = ""
    #: what the route's AI transform's model call used (None: no model was called)
    usage: Usage | None = None
    #: the target when the route fans out to several (part of the hand-off's key)
    branch: str = ""

    def key(self, turn_id: str) -> str:
        return handoff_key(self.route, turn_id, self.branch)


class PromptRouter:
    def __init__(self, config: Config, tiles: dict[str, TileRuntime], transforms: TransformRegistry,
                 journal: Journal | None = None, notifier: Notifier | None = None) -> None:
        self.config, self.tiles = config, tiles
        self.journal = journal if journal is not None else Journal(MEMORY)
        self.notifier = notifier if notifier is not None else Notifier()
        self._transforms: dict[str, Transform] = {
            route.label: transforms.get(route.transform_type).from_config(route.transform_options)
            for route in config.routes
        }
        for transform in self._transforms.values():
            transform.configure(config.settings)
        self._match = {route.label: re.compile(route.match) for route in config.routes if route.match}
        #: the join routes' groups (None: no route joins)
        self.joins = JoinStage(config, self.journal, self) if any(r.is_join for r in config.routes) else None

    def fired_by(self, tile: str) -> list[Route]:
        """The routes a turn of ``tile`` fires on its own (a join waits for its group)."""
        return [r for r in self.config.routes_from(tile) if not r.is_join]

    async def run(self, receive: ObjectReceiveStream[Response], send: ObjectSendStream[Prompt]) -> None:
        async with receive, send, anyio.create_task_group() as tg:
            if self.joins is not None:  # its deadlines, and the groups a restart found complete
                tg.start_soon(self.joins.run, send)
            async for response in receive:  # a journal that cannot be written holds the router until it can
                for prompt in await self.route(response):
                    await send.send(prompt)
            tg.cancel_scope.cancel()

    async def route(self, response: Response) -> list[Prompt]:
        """Every decision for ``response`` journaled (its join groups' answers before the turn counts as
        routed); the prompts to type."""
        completion = response.completion
        await self.journal.until_done(partial(self.journal.record_pending, completion, [
            (r.label, target, branch) for r in self.fired_by(completion.tile)
            for target, branch in r.branches()]))
        decisions = await self.decide(response)
        joined = await self.joins.take(response) if self.joins is not None else []
        await self.journal.until_done(partial(self.journal.record_routing, completion, [
            (d.prompt, d.route, d.target, d.state, d.reason, d.branch) for d in decisions]))
        for d in decisions:
            if d.usage is not None:
                await self.journal.until_done(partial(
                    self.journal.record_usage, d.key(completion.turn_id), asdict(d.usage)))
        return [d.prompt for d in decisions if d.prompt is not None] + joined

    async def decide(self, response: Response) -> list[RouteDecision]:
        """What each route from the response's tile does with it, for each of its targets, and why (for
        the journal)."""
        decisions: list[RouteDecision] = []
        for route in self.fired_by(response.completion.tile):
            for target, branch in route.branches():
                decisions.append(await self.decide_one(route, target, branch, response))
        return decisions

    async def decide_one(self, route: Route, target: str, branch: str, response: Response) -> RouteDecision:
        """What ``route`` does with ``response`` for ``target`` (``branch``: a fan-out's)."""
        completion = response.completion
        key = handoff_key(route.label, completion.turn_id, branch)

        def skip(reason: str) -> RouteDecision:
            log.info("route %s: skipped turn %s: %s", route.label, completion.turn_id, reason)
            return RouteDecision(route.label, target, None, "skipped", reason, branch=branch)

        why_not = self.why_not(route, response)
        if why_not:
            return skip(why_not)
        limit = self.config.settings.hop_limit
        if completion.hop >= limit:
            log.warning("route %s: not handing off turn %s: the chain reached max_hops=%d", route.label,
                        completion.turn_id, limit)
            self.notifier.max_hops(key, route.label, completion.tile, limit)
            return RouteDecision(route.label, target, None, "skipped", f"the chain reached max_hops={limit}",
                                 branch=branch)
        try:
            result = TransformResult.of(await self.transform(route, response, target))
        except TransformSkipped as exc:
            return skip(str(exc))
        except Exception as exc:
            reason = f"transform {route.transform_type} failed: {type(exc).__name__}: {exc}"
            log.error("route %s: %s (turn %s)", route.label, reason, completion.turn_id)
            self.notifier.failed(key, route.label, target, reason)
            return RouteDecision(route.label, target, None, "failed", reason, branch=branch)
        if route.chooses is not None:
            chosen = self.chosen(route, result)
            if chosen is None:
                return RouteDecision(route.label, target, None, "skipped", f"{result.note}; no tile was "
                                     "chosen and the route has no default:", result.usage, branch)
            target, note = chosen
            result = TransformResult(result.text, note, result.usage, target)
        prompt = Prompt(route=route.label, source=completion.tile, target=target, text=result.text,
                        turn_id=completion.turn_id, hop=completion.hop + 1, note=result.note, branch=branch)
        state = "awaiting" if route.gate == "person" else "transformed"  # a person's gate: until they decide
        return RouteDecision(route.label, target, prompt, state, result.note, result.usage, branch)

    @staticmethod
    def chosen(route: Route, result: TransformResult) -> tuple[str, str] | None:
        """The tile a choosing route's hand-off goes to, and the note that says why: the transform's pick
        when it is one of the route's tiles, else the route's ``default:`` (None: neither)."""
        choice = route.chooses
        assert choice is not None
        if result.target in route.targets:
            return result.target, result.note
        if choice.default is None:
            return None
        why = (f"it chose {result.target!r}, not one of the route's tiles" if result.target
               else result.note or "the transform chose no tile")
        return choice.default, f"to the default {choice.default}: {why}"

    def why_not(self, route: Route, response: Response) -> str:
        """Why ``route`` does not fire for ``response`` ("" if it does); ``baton preview`` asks too."""
        outcome = response.completion.outcome
        if route.on != "any" and route.on != outcome:
            return f"the turn {outcome}; the route is for {route.on} turns"
        pattern = self._match.get(route.label)
        if pattern is not None and not pattern.search(response.text):
            return f"the answer does not match {route.match!r}"
        return ""

    def transform_for(self, route: Route) -> Transform:
        """The route's configured transform instance."""
        return self._transforms[route.label]

    async def transform(
        self, route: Route, response: Response, target: str | None = None
    ) -> str | TransformResult:
        return await self._transforms[route.label].apply(self.input_for(route, response, target))

    def candidates(self, route: Route) -> tuple[Candidate, ...]:
        """The tiles a choosing route's transform picks from (none for any other route)."""
        if route.chooses is None:
            return ()
        return tuple(Candidate(name, self._agent_of(name), self.config.tiles[name].description)
                     for name in route.targets)

    def _agent_of(self, tile: str) -> str:
        runtime = self.tiles.get(tile)  # a tile on another host has no runtime here
        return runtime.adapter.name if runtime else self.config.tiles[tile].agent

    def input_for(self, route: Route, response: Response, target: str | None = None) -> TransformInput:
        """What the route's transform is given for ``response`` and ``target`` (default: the route's first)
        (also used by ``baton preview``)."""
        tile = response.completion.tile
        source_name = tile if tile in route.sources else route.sources[0]
        target_name = target or route.branches()[0][0]
        source, target_rt = self.tiles[source_name], self.tiles.get(target_name)
        target_tile = self.config.tiles[target_name]  # a tile on another host has no runtime here

        async def terminal_text() -> str:
            if source.adapter.reads_screen and response.source == "terminal":
                return response.text
            fallback = await source.fallback.response(response.completion)
            return fallback.text if fallback else ""

        data = TransformInput(
            response=response,
            answers=response.answers or {source_name: response.text},
            route=route.label,
            source=source_name,
            target=target_name,
            source_agent=source.adapter.name,
            target_agent=target_rt.adapter.name if target_rt else target_tile.agent,
            source_description=source.ctx.tile.description,
            target_description=target_tile.description,
            cwd=response.cwd or source.ctx.tile.cwd,
            terminal_text=terminal_text,
            choices=self.candidates(route),
        )
        return data
