"""The router on its own (no tmux): which routes fire for an answer, what the transform made of it, the hop
it carries, and every decision with its reason in the journal."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from pipeline.engine.journal import MEMORY, Journal
from pipeline.engine.stages.route import PromptRouter
from pipeline.plugin.events import Response
from pipeline.plugin.manager import load_registries
from pipeline.plugin.registry import TransformRegistry
from pipeline.plugin.transforms import Transform, TransformInput, TransformSkipped
from tests.support.stages import completion, config, tiles

pytestmark = pytest.mark.anyio

ROUTES = """
version: 1
settings: {max_hops: 3}
tiles:
  a: {pane: '%1', agent: shell}
  b: {pane: '%2', agent: shell}
  c: {pane: '%3', agent: shell}
  d: {pane: '%4', agent: shell}
routes:
  - {from: a, to: b, transform: {type: template, template: "{source}->{target}: {response}"}}
  - {from: a, to: c, match: 'LGTM|approved'}
  - {from: a, to: d, on: failed}
"""


class Choosy(Transform[BaseModel]):
    """Skips answers that say "skip me", fails on "break me", passes the rest through."""

    name = "choosy"

    async def apply(self, data: TransformInput) -> str:
        if "skip me" in data.response.text:
            raise TransformSkipped("the transform said no")
        if "break me" in data.response.text:
            raise RuntimeError("model unreachable")
        return data.response.text


def router(text: str = ROUTES) -> tuple[PromptRouter, Journal]:
    cfg, journal = config(text), Journal(MEMORY)
    transforms = load_registries().transforms
    merged = TransformRegistry()
    for name in transforms:
        merged.add(transforms.get(name), transforms.origin(name))
    merged.add(Choosy, "tests")
    return PromptRouter(cfg, tiles(cfg), merged, journal=journal), journal


def answer(text: str, **kw: object) -> Response:
    return Response(completion=completion("a", "t1", **kw), text=text, source="transcript")


async def test_each_route_from_the_tile_decides_with_its_reason() -> None:
    r, _ = router()
    decisions = await r.decide(answer("looks fine"))
    assert [(d.route, d.state, d.reason) for d in decisions] == [
        ("a->b", "transformed", ""),
        ("a->c", "skipped", "the answer does not match 'LGTM|approved'"),
        ("a->d", "skipped", "the turn completed; the route is for failed turns"),
    ]
    prompt = decisions[0].prompt
    assert prompt is not None
    assert (prompt.text, prompt.source, prompt.target, prompt.turn_id, prompt.hop) == (
        "a->b: looks fine", "a", "b", "t1", 1)


async def test_match_and_on_select_routes() -> None:
    r, _ = router()

    async def fired(response: Response) -> list[str]:
        return [d.route for d in await r.decide(response) if d.state == "transformed"]

    assert await fired(answer("LGTM, approved")) == ["a->b", "a->c"]
    assert await fired(answer("LGTM, approved", outcome="failed")) == ["a->d"]  # routes are for completed


async def test_a_chain_max_hops_deep_fires_nothing_and_says_so() -> None:
    r, _ = router()
    assert [d.prompt.hop for d in await r.decide(answer("x", hop=2)) if d.prompt] == [3]
    decisions = await r.decide(answer("LGTM", hop=3))
    assert {(d.state, d.reason) for d in decisions if d.route != "a->d"} == {
        ("skipped", "the chain reached max_hops=3")}


async def test_a_transform_that_skips_or_fails_is_recorded_and_the_other_routes_still_go() -> None:
    r, _ = router("""
version: 1
tiles:
  a: {pane: '%1', agent: shell}
  b: {pane: '%2', agent: shell}
  c: {pane: '%3', agent: shell}
routes:
  - {from: a, to: b, transform: {type: choosy}}
  - {from: a, to: c}
""")
    skipped = await r.decide(answer("please skip me"))
    assert [(d.state, d.reason) for d in skipped] == [
        ("skipped", "the transform said no"), ("transformed", "")]
    failed = await r.decide(answer("break me"))
    assert [(d.state, d.reason) for d in failed] == [
        ("failed", "transform choosy failed: RuntimeError: model unreachable"), ("transformed", "")]


async def test_run_records_every_decision_in_the_journal_and_sends_only_prompts() -> None:
    r, journal = router()
    send_in, receive_in = anyio.create_memory_object_stream[Response](4)
    send_out, receive_out = anyio.create_memory_object_stream(4)
    await send_in.send(answer("approved"))
    send_in.close()
    await r.run(receive_in, send_out)
    sent = [p async for p in receive_out]
    assert [(p.route, p.text) for p in sent] == [("a->b", "a->b: approved"), ("a->c", "approved")]
    assert sorted((h.route, h.state, h.note) for h in journal.history()) == [
        ("a->b", "transformed", ""), ("a->c", "transformed", ""),
        ("a->d", "skipped", "the turn completed; the route is for failed turns")]
