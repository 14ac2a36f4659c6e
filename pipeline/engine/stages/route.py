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

from anyio.abc import ObjectReceiveStream, ObjectSendStream

from pipeline.engine.config import Config, Route
from pipeline.engine.journal import MEMORY, Journal
from pipeline.engine.notify import Notifier
from pipeline.engine.tiles import TileRuntime
from pipeline.plugin.events import Prompt, Response
from pipeline.plugin.registry import TransformRegistry
from pipeline.plugin.transforms import Transform, TransformInput, TransformResult, TransformSkipped, Usage

__all__ = ["PromptRouter", "RouteDecision"]

log = logging.getLogger("batonpass")


@dataclass(frozen=True)
class RouteDecision:
    route: str
    target: str
    prompt: Prompt | None
    state: str  # transformed | skipped | failed
    reason: str = ""
    #: what the route's AI transform's model call used (None: no model was called)
    usage: Usage | None = None


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

    async def run(self, receive: ObjectReceiveStream[Response], send: ObjectSendStream[Prompt]) -> None:
        async with receive, send:
            async for response in receive:  # a journal that cannot be written holds the router until it can
                completion = response.completion
                await self.journal.until_done(partial(self.journal.record_pending, completion, [
                    (r.label, r.to) for r in self.config.routes_from(completion.tile)]))
                decisions = await self.decide(response)
                await self.journal.until_done(partial(self.journal.record_routing, completion, [
                    (d.prompt, d.route, d.target, d.state, d.reason) for d in decisions]))
                for d in decisions:
                    if d.usage is not None:
                        await self.journal.until_done(partial(
                            self.journal.record_usage, f"{d.route}@{completion.turn_id}", asdict(d.usage)))
                for d in decisions:
                    if d.prompt is not None:
                        await send.send(d.prompt)

    async def decide(self, response: Response) -> list[RouteDecision]:
        """What each route from the response's tile does with it, and why (for the journal)."""
        completion = response.completion
        decisions = []
        for route in self.config.routes_from(completion.tile):
            def skip(reason: str, route: Route = route) -> RouteDecision:
                log.info("route %s: skipped turn %s: %s", route.label, completion.turn_id, reason)
                return RouteDecision(route.label, route.to, None, "skipped", reason)

            why_not = self.why_not(route, response)
            if why_not:
                decisions.append(skip(why_not))
                continue
            limit = self.config.settings.hop_limit
            if completion.hop >= limit:
                log.warning("route %s: not handing off turn %s: the chain reached max_hops=%d", route.label,
                            completion.turn_id, limit)
                decisions.append(RouteDecision(route.label, route.to, None, "skipped",
                                               f"the chain reached max_hops={limit}"))
                self.notifier.max_hops(f"{route.label}@{completion.turn_id}", route.label, route.from_, limit)
                continue
            try:
                result = TransformResult.of(await self.transform(route, response))
            except TransformSkipped as exc:
                decisions.append(skip(str(exc)))
                continue
            except Exception as exc:
                reason = f"transform {route.transform_type} failed: {type(exc).__name__}: {exc}"
                log.error("route %s: %s (turn %s)", route.label, reason, completion.turn_id)
                decisions.append(RouteDecision(route.label, route.to, None, "failed", reason))
                self.notifier.failed(f"{route.label}@{completion.turn_id}", route.label, route.to, reason)
                continue
            prompt = Prompt(route=route.label, source=route.from_, target=route.to, text=result.text,
                            turn_id=completion.turn_id, hop=completion.hop + 1, note=result.note)
            decisions.append(RouteDecision(route.label, route.to, prompt, "transformed", result.note,
                                           result.usage))
        return decisions

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

    async def transform(self, route: Route, response: Response) -> str | TransformResult:
        return await self._transforms[route.label].apply(self.input_for(route, response))

    def input_for(self, route: Route, response: Response) -> TransformInput:
        """What the route's transform is given for ``response`` (also used by ``baton preview``)."""
        source, target = self.tiles[route.from_], self.tiles.get(route.to)
        target_tile = self.config.tiles[route.to]  # a tile on another host has no runtime here

        async def terminal_text() -> str:
            if source.adapter.reads_screen and response.source == "terminal":
                return response.text
            fallback = await source.fallback.response(response.completion)
            return fallback.text if fallback else ""

        data = TransformInput(
            response=response,
            route=route.label,
            source=route.from_,
            target=route.to,
            source_agent=source.adapter.name,
            target_agent=target.adapter.name if target else target_tile.agent,
            source_description=source.ctx.tile.description,
            target_description=target_tile.description,
            cwd=response.cwd or source.ctx.tile.cwd,
            terminal_text=terminal_text,
        )
        return data
