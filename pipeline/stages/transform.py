"""Stage 3: answer → prompts. Route matching, the transform call, and hop accounting.

A route fires when its ``from`` tile finished a turn with an outcome its ``on`` accepts and (if set) its
``match`` regex is found in the answer. A turn that is already ``max_hops`` automatic hand-offs deep
fires nothing: that is how loops between agents end.
"""

from __future__ import annotations

import logging
import re

from anyio.abc import ObjectReceiveStream, ObjectSendStream

from pipeline.config import Config, Route
from pipeline.events import Prompt, Response
from pipeline.registry import TransformRegistry
from pipeline.tiles import TileRuntime
from pipeline.transforms import Transform, TransformInput, TransformResult, TransformSkipped

__all__ = ["PromptRouter"]

log = logging.getLogger("batonpass")


class PromptRouter:
    def __init__(self, config: Config, tiles: dict[str, TileRuntime], transforms: TransformRegistry) -> None:
        self.config, self.tiles = config, tiles
        self._transforms: dict[str, Transform] = {
            route.label: transforms.get(route.transform_type).from_config(route.transform_options)
            for route in config.routes
        }
        for transform in self._transforms.values():
            transform.configure(config.settings)
        self._match = {route.label: re.compile(route.match) for route in config.routes if route.match}

    async def run(self, receive: ObjectReceiveStream[Response], send: ObjectSendStream[Prompt]) -> None:
        async with receive, send:
            async for response in receive:
                for prompt in await self.prompts_for(response):
                    await send.send(prompt)

    async def prompts_for(self, response: Response) -> list[Prompt]:
        completion = response.completion
        prompts = []
        for route in self.config.routes_from(completion.tile):
            if not self._fires(route, response):
                continue
            limit = self.config.settings.hop_limit
            if completion.hop >= limit:
                log.warning("route %s: not handing off turn %s: the chain reached max_hops=%d", route.label,
                            completion.turn_id, limit)
                continue
            try:
                result = TransformResult.of(await self.transform(route, response))
            except TransformSkipped as exc:
                log.info("route %s: skipped turn %s: %s", route.label, completion.turn_id, exc)
                continue
            except Exception as exc:
                log.error("route %s: transform %s failed on turn %s: %s: %s", route.label, route.transform_type,
                          completion.turn_id, type(exc).__name__, exc)
                continue
            prompts.append(Prompt(route=route.label, source=route.from_, target=route.to, text=result.text,
                                  turn_id=completion.turn_id, hop=completion.hop + 1, note=result.note))
        return prompts

    def _fires(self, route: Route, response: Response) -> bool:
        outcome = response.completion.outcome
        if route.on != "any" and route.on != outcome:
            return False
        pattern = self._match.get(route.label)
        if pattern is not None and not pattern.search(response.text):
            log.info("route %s: turn %s does not match %r", route.label, response.completion.turn_id, route.match)
            return False
        return True

    def transform_for(self, route: Route) -> Transform:
        """The route's configured transform instance."""
        return self._transforms[route.label]

    async def transform(self, route: Route, response: Response) -> str | TransformResult:
        return await self._transforms[route.label].apply(self.input_for(route, response))

    def input_for(self, route: Route, response: Response) -> TransformInput:
        """What the route's transform is given for ``response`` (also used by ``baton preview``)."""
        source, target = self.tiles[route.from_], self.tiles[route.to]

        async def terminal_text() -> str:
            if source.adapter.reads_screen and response.source == "terminal":
                return response.text
            fallback = await source.fallback.response(response.completion)
            return fallback.text if fallback else ""

        data = TransformInput(
            response=response, route=route.label, source=route.from_, target=route.to,
            source_agent=source.adapter.name, target_agent=target.adapter.name,
            source_description=source.ctx.tile.description, target_description=target.ctx.tile.description,
            cwd=response.cwd or source.ctx.tile.cwd, terminal_text=terminal_text,
        )
        return data
