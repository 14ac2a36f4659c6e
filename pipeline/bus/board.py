"""Every host's tiles and hand-offs in one place: a JetStream key-value bucket (``baton-state``).

Each daemon whose routes cross hosts puts, every few seconds, ``tiles.<host>`` (its tiles and their state
as the dispatcher sees them) and ``history.<host>`` (its latest hand-offs, without their text) into the
bucket. ``baton status --all-hosts`` and ``baton history --all-hosts`` read every host's keys from any
machine that reaches the bus. The values are a view, never a source of truth: each host's journal is.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any

import anyio
import orjson
from nats.js.api import KeyValueConfig, StorageType

from pipeline.bus.link import BusLink, subject_token
from pipeline.engine.journal import Journal

__all__ = ["BOARD_BUCKET", "board_rows", "publish_board"]

log = logging.getLogger("batonpass")
BOARD_BUCKET = "baton-state"
BOARD_EVERY_S = 2.0
#: the hand-offs each host shows (the key-value value must stay far below max_payload)
BOARD_HISTORY = 200
_HIDDEN = ("prompt", "response")


async def _bucket(link: BusLink) -> Any:
    try:
        return await link.js.key_value(BOARD_BUCKET)
    except Exception:
        return await link.js.create_key_value(
            KeyValueConfig(
                bucket=BOARD_BUCKET, history=1, storage=StorageType.FILE, replicas=link.settings.replicas
            )
        )


async def publish_board(
    link: BusLink, host: str, journal: Journal, tiles: Callable[[], Awaitable[list[dict[str, Any]]]]
) -> None:
    """Keep this host's keys up to date until cancelled (a bus outage only delays them)."""
    token = subject_token(host)
    bucket = None
    while True:
        try:
            bucket = bucket or await _bucket(link)
            history = [
                {k: v for k, v in asdict(r).items() if k not in _HIDDEN} | {"host": host}
                for r in journal.history(BOARD_HISTORY)
            ]
            await bucket.put(f"history.{token}", orjson.dumps(history))
            await bucket.put(f"tiles.{token}", orjson.dumps([row | {"host": host} for row in await tiles()]))
        except Exception as exc:
            log.debug("bus: board not updated (%s: %s)", type(exc).__name__, exc)
        await anyio.sleep(BOARD_EVERY_S)


async def board_rows(link: BusLink, kind: str) -> list[dict[str, Any]]:
    """Every host's rows of ``kind`` ("tiles" or "history") from the bucket."""
    bucket = await _bucket(link)
    try:
        keys = await bucket.keys()
    except Exception:  # no keys yet
        return []
    rows: list[dict[str, Any]] = []
    for key in keys:
        if key.startswith(f"{kind}."):
            entry = await bucket.get(key)
            try:
                value = orjson.loads(entry.value) if entry.value else []
            except orjson.JSONDecodeError:
                value = None
            if not isinstance(value, list):  # written by something else than batonpass: left out
                log.warning("bus: %s in %s is not a list of rows; left out", key, BOARD_BUCKET)
                continue
            rows += value
    return rows
