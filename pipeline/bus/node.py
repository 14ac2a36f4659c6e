"""A daemon's end of the bus: it publishes the prompts for tiles on other hosts, and takes in its own.

Out: a prompt whose target runs on another host stays ``transformed`` in this host's journal until the
server acknowledged the publish (bus down: kept and retried, in order, never dropped), then ends
``published``. The message id is the journal key, so a republish after a crash is dropped by the server.

In: the host's durable consumer. A message whose key this host's journal does not have is recorded
(``transformed``; ``awaiting`` when its route has a person's gate: decided here, on the target's host)
and handed to the dispatcher as if a local route had made it; the message is acknowledged only once the
journal holds the outcome. A redelivery (a lost ack, a restart) finds the key and types nothing; a hand-off
still on its way is the dispatcher's already (the restart's recovery queued it).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from pipeline.bus.link import ACK_WAIT_S, ENVELOPE_BYTES, BusLink
from pipeline.engine.config import Config
from pipeline.engine.hosts import tile_host
from pipeline.engine.journal import FINAL_STATES, Journal
from pipeline.plugin.events import Prompt

__all__ = ["BusNode"]

log = logging.getLogger("batonpass")
#: how often held messages are checked against the journal (an ack follows the outcome this closely)
HELD_TICK_S = 0.05
#: tests only: the daemon kills itself after the server acknowledged this key and before the journal says so
CRASH_AFTER_PUBLISH_ENV = "BATON_TEST_CRASH_AFTER_PUBLISH"


class BusNode:
    def __init__(self, config: Config, host: str, journal: Journal, link: BusLink | None = None) -> None:
        self.config, self.host, self.journal = config, host, journal
        self.link = link or BusLink(config.settings.bus)
        self._out_send: ObjectSendStream[Prompt]
        self._out_send, self._out_receive = anyio.create_memory_object_stream[Prompt](1024)
        #: received messages waiting for their outcome in the journal, by key
        self.held: dict[str, tuple[Any, float, str | None]] = {}
        self.connected = anyio.Event()
        #: performs an action another host sent (:mod:`pipeline.bus.actions`): its id, the message's body
        self.on_action: Callable[[str, dict[str, Any]], Awaitable[tuple[bool, str]]] | None = None

    def is_remote(self, tile: str) -> bool:
        return tile in self.config.tiles and tile_host(self.config.tiles[tile], self.host) != self.host

    # ---- out ---------------------------------------------------------------------------------------------

    async def split(self, receive: ObjectReceiveStream[Prompt], local: ObjectSendStream[Prompt]) -> None:
        """Prompts for this host's tiles go to the dispatcher, the others to the publisher."""
        async with receive, local:
            async for prompt in receive:
                if self.is_remote(prompt.target):
                    await self._out_send.send(prompt)
                else:
                    await local.send(prompt)

    async def _publisher(self) -> None:
        async with self._out_receive:
            async for prompt in self._out_receive:
                await self.publish(prompt)

    async def publish(self, prompt: Prompt) -> None:
        """Publish until the server acknowledges it; then the journal says ``published``."""
        target_host = tile_host(self.config.tiles[prompt.target], self.host)
        body: dict[str, Any] = {
            "v": 1,
            "key": prompt.key,
            "route": prompt.route,
            "source": prompt.source,
            "source_host": self.host,
            "target": prompt.target,
            "turn_id": prompt.turn_id,
            "hop": prompt.hop,
            "max_hops": self.config.settings.hop_limit,
            "created": prompt.created,
            "note": prompt.note,
            "branch": prompt.branch,
        }
        text = prompt.text.encode("utf-8", "surrogatepass")
        # the size as sent: JSON escapes (a newline is 2 bytes, a control character 6) can double the text
        inline = orjson.dumps(body | {"text": prompt.text})
        delay, said = 0.2, False
        while True:
            try:
                payload = inline
                if len(inline) + ENVELOPE_BYTES > self.link.max_payload:
                    store = await self.link.answers()
                    await store.put(prompt.key, text)
                    body["object"], body["size"] = prompt.key, len(text)
                    payload = orjson.dumps(body)
                ack = await self.link.js.publish(self.link.subject(target_host, prompt.target),
                                                 payload, headers={"Nats-Msg-Id": prompt.key})
                break
            except Exception as exc:
                if not said:
                    log.warning(
                        "kept        %s -> %s@%s: the bus did not take it (%s: %s); retrying",
                        prompt.key,
                        prompt.target,
                        target_host,
                        type(exc).__name__,
                        exc,
                    )
                    said = True
                await anyio.sleep(delay)
                delay = min(delay * 2, 5.0)
        if os.environ.get(CRASH_AFTER_PUBLISH_ENV) == prompt.key:  # the tests' crash between the two steps
            os.kill(os.getpid(), signal.SIGKILL)
        dup = " (a duplicate: the server had it)" if ack.duplicate else ""
        self.journal.set_state(
            prompt.key, "published", note=f"to host {target_host}, stream seq {ack.seq}{dup}"
        )
        log.info("published   %s -> %s@%s (hop %d, %d chars%s)", prompt.source, prompt.target, target_host,
                 prompt.hop, len(prompt.text), ", via the object store" if "object" in body else "")

    # ---- in ----------------------------------------------------------------------------------------------

    async def run(self, submit: Callable[[Prompt], Awaitable[None]], *, inbox: bool = True,
                  tiles: Callable[[], Awaitable[list[dict[str, Any]]]] | None = None) -> None:
        """Connect; publish what :meth:`split` hands over; consume this host's hand-offs (``inbox``); keep
        this host's view on the board (``tiles`` gives its tiles' rows) for ``--all-hosts``."""
        await self.link.connect()
        self.connected.set()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._publisher)
                if tiles is not None:
                    from pipeline.bus.board import publish_board

                    tg.start_soon(publish_board, self.link, self.host, self.journal, tiles)
                if inbox:
                    tg.start_soon(self._consume, submit)
                    tg.start_soon(self._settle)
        finally:
            await self.link.close()

    async def _consume(self, submit: Callable[[Prompt], Awaitable[None]]) -> None:
        sub = await self.link.consumer(self.host)
        log.info("bus: consuming the hand-offs for host %s", self.host)
        while True:
            try:
                msgs = await sub.fetch(1, timeout=1.0)  # batch 1: a batch waits to fill, adding latency
            except Exception as exc:  # a timeout (nothing waiting) or a bus outage: ask again
                if type(exc).__name__ != "TimeoutError":
                    log.debug("bus: fetch: %s: %s", type(exc).__name__, exc)
                    await anyio.sleep(0.5)
                continue
            for msg in msgs:
                try:
                    await self._take(msg, submit)
                except Exception as exc:  # not acknowledged: the server redelivers it
                    log.error("bus: could not take a hand-off (%s: %s); it will be redelivered",
                              type(exc).__name__, exc)

    async def _take(self, msg: Any, submit: Callable[[Prompt], Awaitable[None]]) -> None:
        body = orjson.loads(msg.data)
        if "action" in body:
            await self._take_action(msg, body)
            return
        key = str(body["key"])
        record = self.journal.handoff(key)
        if record is not None and record.state in FINAL_STATES:
            log.info("bus: %s again (redelivered); %s here already, not typed again", key, record.state)
            await msg.ack()
            return
        if key in self.held or record is not None:
            self.held[key] = (msg, time.monotonic(), body.get("object"))
            return
        if "object" in body:
            text = (await (await self.link.answers()).get(str(body["object"]))).data.decode(
                "utf-8", "surrogatepass"
            )
        else:
            text = str(body["text"])
        prompt = Prompt(
            route=str(body["route"]),
            source=str(body["source"]),
            target=str(body["target"]),
            text=text,
            turn_id=str(body["turn_id"]),
            hop=int(body["hop"]),
            created=float(body["created"]),
            note=str(body.get("note") or ""),
            branch=str(body.get("branch") or ""),
        )
        via = f"from host {body.get('source_host')} over the bus"
        if prompt.target not in self.config.tiles or self.is_remote(prompt.target):
            self.journal.record_incoming(prompt, via)
            self.journal.set_state(
                key,
                "failed",
                error=f"tile {prompt.target!r} does not run on host {self.host} in this routes.yaml",
            )
            await msg.ack()
            return
        if prompt.hop > int(body.get("max_hops", prompt.hop)):
            self.journal.record_incoming(prompt, via)
            self.journal.set_state(key, "skipped", note=f"the chain reached max_hops={body['max_hops']}")
            await msg.ack()
            return
        gated = any(r.label == prompt.route and r.gate == "person" for r in self.config.routes)
        self.journal.record_incoming(prompt, via, "awaiting" if gated else "transformed")
        self.held[key] = (msg, time.monotonic(), body.get("object"))
        log.info("received    %s -> %s %s (hop %d)", prompt.source, prompt.target, via, prompt.hop)
        await submit(prompt)

    async def _take_action(self, msg: Any, body: dict[str, Any]) -> None:
        """An action from another host: performed once (the journal's ``actions`` row, keyed by its id), its
        outcome published back, then the message acknowledged; a redelivery gets the outcome journaled."""
        from pipeline.bus.actions import action_of, outcome_subject, too_late

        action_id = str(body["id"])
        done = self.journal.action(action_id)
        late = too_late(body, time.time()) if done is None else None
        if done is not None and done.outcome != "started":
            ok, message = done.outcome == "done", done.message
        elif done is not None:
            ok, message = False, "it was being done when this daemon stopped: look at the pane"
        elif late is not None:
            ok, message = False, late
            a = action_of(body)
            self.journal.start_action(action_id, a.kind, a.target, a.origin, self.host)
            self.journal.end_action(action_id, False, late)
        elif self.on_action is None:
            ok, message = False, f"the daemon of host {self.host} takes no actions"
        else:
            ok, message = await self.on_action(action_id, body)
        log.info("action      %s from host %s: %s", body["action"].get("kind"), body.get("source_host"),
                 message)
        await self.link.nc.publish(outcome_subject(action_id), orjson.dumps({"ok": ok, "message": message}))
        await msg.ack()

    async def _settle(self) -> None:
        """Acknowledge each held message once the journal holds its outcome; keep the others in progress."""
        while True:
            await anyio.sleep(HELD_TICK_S)
            now = time.monotonic()
            for key, (msg, since, obj) in list(self.held.items()):
                record = self.journal.handoff(key)
                try:
                    if record is not None and record.state in FINAL_STATES:
                        await msg.ack()
                        del self.held[key]
                        if obj:
                            await self._forget_answer(obj)
                    elif now - since > ACK_WAIT_S / 3:
                        await msg.in_progress()
                        self.held[key] = (msg, now, obj)
                except Exception as exc:  # the bus is down: a redelivery finds the outcome in the journal
                    log.debug("bus: ack of %s: %s: %s", key, type(exc).__name__, exc)

    async def _forget_answer(self, name: str) -> None:
        try:
            await (await self.link.answers()).delete(name)
        except Exception as exc:
            log.debug("bus: answer %s stays in the object store (%s)", name, exc)
