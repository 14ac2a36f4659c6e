"""Stage 4: safe delivery of prompts into their target panes, queued per target, in order, once.

For each prompt the target's adapter is asked whether the pane can take it. ``busy`` or ``draft``: wait
(the user's own typing is never interleaved with ours). ``absent`` (the pane runs something other than the
tile's agent — typically a bare shell after the agent exited) or ``gone``: nothing is typed; the hand-off
is reported, kept, and retried with backoff until ``settings.give_up_s``. Once typed, a prompt is never
typed again: it ends ``delivered`` (the agent showed it started), ``unconfirmed`` or ``failed``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from pipeline.agents import AgentAdapter
from pipeline.events import Delivery, Prompt
from pipeline.hops import HopLedger
from pipeline.text import sanitize
from pipeline.tiles import TileRuntime
from pipeline.tmux import TmuxError

__all__ = ["PromptDispatcher", "type_prompt"]

log = logging.getLogger("batonpass")

WAIT_TICK_S = 0.2


async def type_prompt(adapter: AgentAdapter, text: str,
                      on_submit: Callable[[], None] | None = None) -> tuple[bool, str]:
    """Type ``text`` into the adapter's pane the one safe way, and watch for the turn to start.

    Sanitize; paste as one unit; wait the adapter's submit delay; Enter; then wait up to the adapter's
    ``confirm_timeout_s`` for it to show the turn started. Returns (confirmed, pane_id). Raises
    :class:`pipeline.tmux.TmuxError` if the pane could not be typed into.
    """
    clean = sanitize(text)
    if not clean:
        raise ValueError("nothing printable left to type after sanitizing")
    ctx = adapter.ctx
    info = await ctx.pane()
    await ctx.tmux.paste(info.pane_id, clean)
    await anyio.sleep(adapter.submit_delay_s)
    before = await adapter.snapshot()
    ctx.last_prompt, ctx.prompt_sent_at = clean, time.time()
    if on_submit is not None:
        on_submit()
    await ctx.tmux.send_keys(info.pane_id, "Enter")
    with anyio.move_on_after(adapter.confirm_timeout_s):
        while not await adapter.turn_started(before):
            await anyio.sleep(0.05)
        return True, info.pane_id
    return False, info.pane_id


class PromptDispatcher:
    def __init__(self, tiles: dict[str, TileRuntime], hops: HopLedger, *, give_up_s: float = 600.0,
                 dry_run: bool = False, report: Callable[[Delivery], None] | None = None,
                 queue_size: int = 256) -> None:
        self.tiles, self.hops, self.give_up_s, self.dry_run = tiles, hops, give_up_s, dry_run
        self.report = report or (lambda delivery: None)
        self.queue_size = queue_size
        self._queues: dict[str, ObjectSendStream[Prompt]] = {}

    async def run(self, receive: ObjectReceiveStream[Prompt]) -> None:
        async with receive, anyio.create_task_group() as tg:
            try:
                async for prompt in receive:
                    queue = self._queues.get(prompt.target)
                    if queue is None:
                        queue, queue_out = anyio.create_memory_object_stream[Prompt](self.queue_size)
                        self._queues[prompt.target] = queue
                        tg.start_soon(self._serve, prompt.target, queue_out)
                    log.info("queued      %s -> %s (route %s, hop %d)", prompt.source, prompt.target,
                             prompt.route, prompt.hop)
                    await queue.send(prompt)
            finally:
                for queue in self._queues.values():
                    await queue.aclose()

    async def _serve(self, target: str, queue: ObjectReceiveStream[Prompt]) -> None:
        async with queue:
            async for prompt in queue:
                try:
                    delivery = await self.deliver(prompt)
                except Exception as exc:  # a bug in one delivery must not stop the queue
                    delivery = Delivery(prompt, "failed", error=f"{type(exc).__name__}: {exc}")
                    log.error("failed      %s: %s", prompt.key, delivery.error)
                self.report(delivery)

    async def deliver(self, prompt: Prompt) -> Delivery:
        runtime = self.tiles[prompt.target]
        adapter = runtime.adapter
        if self.dry_run:
            print(f"--- {prompt.route} (hop {prompt.hop}) -> {prompt.target} ---\n{sanitize(prompt.text)}\n---",
                  flush=True)
            return Delivery(prompt, "dry-run")
        started, attempts, backoff, said = time.monotonic(), 0, 1.0, ""
        while True:
            try:
                state = await adapter.target_state()
            except TmuxError as exc:
                state = "gone"
                runtime.ctx.forget_pane()
                log.debug("%s: %s", prompt.target, exc)
            if state == "ready":
                break
            waited = time.monotonic() - started
            if state in ("busy", "draft"):
                if said != state:
                    log.info("waiting     %s is %s; %s stays queued", prompt.target, state, prompt.key)
                    said = state
                await anyio.sleep(WAIT_TICK_S)
                continue
            attempts += 1
            reason = (f"pane {runtime.ctx.tile.pane} shows no {adapter.name} agent (a bare shell?); not typing there"
                      if state == "absent" else f"pane {runtime.ctx.tile.pane} is gone")
            if waited >= self.give_up_s:
                log.error("failed      %s -> %s: %s; gave up after %.0fs", prompt.key, prompt.target, reason, waited)
                return Delivery(prompt, "failed", attempts=attempts, error=reason)
            if said != reason:
                log.warning("kept        %s -> %s: %s; retrying with backoff", prompt.key, prompt.target, reason)
                said = reason
            await anyio.sleep(min(backoff, max(self.give_up_s - waited, 0.01)))
            backoff = min(backoff * 2, 30.0)
        try:
            confirmed, pane_id = await type_prompt(adapter, prompt.text,
                                                   on_submit=lambda: self.hops.expect(prompt.target, prompt.hop))
        except (TmuxError, ValueError) as exc:
            log.error("failed      %s -> %s: %s", prompt.key, prompt.target, exc)
            return Delivery(prompt, "failed", attempts=attempts + 1, error=str(exc))
        state = "delivered" if confirmed else "unconfirmed"
        log.info("%-11s %s -> %s (%s, hop %d, %d chars)", state, prompt.source, prompt.target, pane_id, prompt.hop,
                 len(prompt.text))
        return Delivery(prompt, state, pane=pane_id, attempts=attempts + 1)
