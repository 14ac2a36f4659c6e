"""Actions over the bus: ``baton approve`` (and every other action) on a tile of another host goes to that
host's daemon, once, and its outcome comes back.

The sender publishes the action on the JetStream subject of the tile it is about (``baton.handoff.<host>.
<tile>``, the subject its hand-offs take; the body says ``action``), with the action's id as the message id:
a second publish of it is dropped by the server. Before publishing it listens on ``baton.outcome.<id>``
(core NATS). The target host's daemon (:meth:`pipeline.bus.node.BusNode`) performs it under the same id —
its journal's ``actions`` row makes a redelivery do nothing again — publishes the outcome on that subject,
and only then acknowledges the message. A redelivered action is answered with the outcome journaled.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from pipeline.bus.link import BusLink
from pipeline.engine.action_kinds import Action, ActionResult

if TYPE_CHECKING:
    from pipeline.engine.config import Config

__all__ = ["CONNECT_S", "OUTCOME_S", "STALE_S", "action_of", "outcome_subject", "send_action", "too_late"]

log = logging.getLogger("batonpass")
#: how long the sender tries to reach the bus
CONNECT_S = 10.0
#: how long the sender waits for the other host's outcome (an approve confirms in a few seconds)
OUTCOME_S = 30.0


#: an approve, deny or send that reaches its host later than this after it was sent is not done: the prompt
#: on screen by then may be another one than the person saw (hold, resume, pass and drop are done whenever
#: they arrive: the journal, not the screen, says what they act on)
STALE_S = 120.0


def too_late(body: dict[str, Any], now: float) -> str | None:
    """Why the action in ``body`` must not be done any more, or None."""
    kind, sent = body["action"].get("kind"), body.get("sent")
    if kind in ("hold", "resume", "pass", "drop"):
        return None
    if not isinstance(sent, int | float) or now - sent <= STALE_S:
        return None
    return (f"it arrived {now - sent:.0f}s after it was sent (more than {STALE_S:g}s): the screen may show "
            "something else by now; nothing typed")


def outcome_subject(action_id: str) -> str:
    return f"baton.outcome.{action_id}"


def action_of(body: dict[str, Any]) -> Action:
    """The action a message carries, as the daemon that takes it performs it (its origin says it came
    over the bus, and from where)."""
    a = body["action"]
    origin = f"bus {body.get('source_host')} ({a.get('origin', '?')})"
    return Action(kind=a["kind"], target=str(a["target"]), text=a.get("text"), origin=origin)


async def send_action(action: Action, config: Config, host: str, action_id: str, here: str,
                      subject_tile: str) -> ActionResult:
    """Publish ``action`` to ``host``'s daemon (on ``subject_tile``'s subject) and wait for its outcome."""
    link = BusLink(config.settings.bus, quiet=True)
    with anyio.move_on_after(CONNECT_S):
        await link.connect()
    if link.js is None:
        await link.close()
        return ActionResult(False, f"cannot reach the bus ({link.describe()}) within {CONNECT_S:g}s: nothing "
                            f"sent to host {host}")
    try:
        sub = await link.nc.subscribe(outcome_subject(action_id))
        body = {"v": 1, "id": action_id, "source_host": here, "sent": time.time(),
                "action": {"kind": action.kind, "target": action.target, "text": action.text,
                           "origin": action.origin}}
        await link.js.publish(link.subject(host, subject_tile), orjson.dumps(body),
                              headers={"Nats-Msg-Id": f"action:{action_id}"})
        log.debug("action      %s %s sent to host %s (%s)", action.kind, action.target, host, action_id)
        try:
            msg = await sub.next_msg(timeout=OUTCOME_S)
        except Exception:  # nats' TimeoutError
            return ActionResult(False, f"sent to host {host} over the bus, no outcome within {OUTCOME_S:g}s "
                                "(is its baton run up?): its daemon does it once when it takes it")
        outcome = orjson.loads(msg.data)
        return ActionResult(bool(outcome.get("ok")), f"on host {host}: {outcome.get('message', '')}")
    finally:
        await link.close()
