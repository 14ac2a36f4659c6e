"""Stage 2: completion → clean answer. The tile's adapter first; the answer the completion signal carried
(a hook's) next; the terminal when neither has one. Each completion is extracted once, and every route
from its tile gets that one answer."""

from __future__ import annotations

import logging

from anyio.abc import ObjectReceiveStream, ObjectSendStream

from pipeline.engine.tiles import TileRuntime
from pipeline.plugin.events import Completion, Response

__all__ = ["ResponseExtractor"]

log = logging.getLogger("batonpass")


class ResponseExtractor:
    def __init__(self, tiles: dict[str, TileRuntime]) -> None:
        self.tiles = tiles

    async def run(self, receive: ObjectReceiveStream[Completion], send: ObjectSendStream[Response]) -> None:
        async with receive, send:
            async for completion in receive:
                try:
                    response = await self.extract(completion)
                except Exception as exc:
                    log.error("%s: no answer for turn %s: %s: %s", completion.tile, completion.turn_id,
                              type(exc).__name__, exc)
                    continue
                await send.send(response)

    async def extract(self, completion: Completion) -> Response:
        runtime = self.tiles[completion.tile]
        response, why = None, ""
        try:
            response = await runtime.adapter.response(completion)
            if response is None:
                why = f"the {runtime.adapter.name} adapter found no answer"
        except Exception as exc:
            why = f"the {runtime.adapter.name} adapter failed: {type(exc).__name__}: {exc}"
        if response is None and completion.text is not None:
            response = Response(completion=completion, text=completion.text, source="hook",
                                note=why or "answer carried by the completion signal")
        if response is None:
            response = await runtime.fallback.response(completion)
            if response is None:
                raise LookupError(f"{why}; the terminal fallback found nothing either")
            log.info("%s: answer from the terminal (%s)", completion.tile, why)
            response = Response(completion=response.completion, text=response.text, source=response.source,
                                cwd=response.cwd, note=why)
        log.info("response    %s turn %s: %d chars from %s", completion.tile, completion.turn_id,
                 len(response.text), response.source)
        return response
