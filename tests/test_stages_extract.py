"""The extractor on its own (no tmux): the adapter's answer first, the hook's next, the terminal last —
and a turn with no answer anywhere is reported and skipped, never the end of the stage."""

from __future__ import annotations

import logging

import anyio
import pytest

from pipeline.engine.stages.extract import ResponseExtractor
from pipeline.engine.tiles import TileRuntime
from pipeline.plugin.agents import AgentAdapter, Emit, TargetState, TileContext
from pipeline.plugin.events import Completion, Response
from tests.support.stages import completion, config, tiles

pytestmark = pytest.mark.anyio


class Answers(AgentAdapter):
    """An adapter (or a terminal fallback) whose answer is set by the test: a text, None, or an error."""

    name = "answers"

    def __init__(self, ctx: TileContext, answer: str | None | Exception, source: str = "transcript") -> None:
        super().__init__(ctx)
        self.answer, self.source = answer, source

    async def follow(self, emit: Emit) -> None:
        await anyio.sleep_forever()

    async def target_state(self) -> TargetState:
        return "ready"

    async def response(self, completion: Completion) -> Response | None:
        if isinstance(self.answer, Exception):
            raise self.answer
        if self.answer is None:
            return None
        return Response(completion=completion, text=self.answer, source=self.source,  # type: ignore[arg-type]
                        cwd="/work")


def extractor(adapter: str | None | Exception, screen: str | None = "from the screen") -> ResponseExtractor:
    runtime = tiles(config())["a"]
    ctx = runtime.ctx
    return ResponseExtractor({"a": TileRuntime(ctx=ctx, adapter=Answers(ctx, adapter),
                                               fallback=Answers(ctx, screen, source="terminal"))})


async def test_the_adapters_answer_comes_first() -> None:
    r = await extractor("from the transcript").extract(completion("a", "t1", text="from the hook"))
    assert (r.text, r.source, r.cwd, r.note) == ("from the transcript", "transcript", "/work", "")


async def test_the_hooks_answer_when_the_adapter_has_none_or_fails() -> None:
    r = await extractor(None).extract(completion("a", "t1", text="from the hook"))
    assert (r.text, r.source) == ("from the hook", "hook")
    assert r.note == "the answers adapter found no answer"
    r = await extractor(OSError("transcript gone")).extract(completion("a", "t1", text="from the hook"))
    assert (r.text, r.source) == ("from the hook", "hook")
    assert r.note == "the answers adapter failed: OSError: transcript gone"


async def test_the_terminal_last_saying_why() -> None:
    r = await extractor(None).extract(completion("a", "t1"))
    assert (r.text, r.source) == ("from the screen", "terminal")
    assert r.note == "the answers adapter found no answer"


async def test_a_turn_with_no_answer_anywhere_is_logged_and_the_next_one_goes_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stage = extractor(None, screen=None)
    send_in, receive_in = anyio.create_memory_object_stream[Completion](4)
    send_out, receive_out = anyio.create_memory_object_stream[Response](4)
    await send_in.send(completion("a", "lost"))
    await send_in.send(completion("a", "hooked", text="from the hook"))
    send_in.close()
    with caplog.at_level(logging.ERROR, logger="batonpass"):
        await stage.run(receive_in, send_out)
    got = [r async for r in receive_out]
    assert [(r.completion.turn_id, r.text) for r in got] == [("hooked", "from the hook")]
    assert "a: no answer for turn lost: LookupError: the answers adapter found no answer; the terminal " \
           "fallback found nothing either" in caplog.text
