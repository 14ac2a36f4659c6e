"""The connection to the NATS servers, and the JetStream names batonpass uses on them.

Subjects: ``baton.handoff.<host>.<tile>`` (one per target host and tile). The stream (``BATON`` by default)
keeps them on disk until the target host's durable consumer ``baton-<host>`` acknowledged them, and drops a
second publish with the same ``Nats-Msg-Id`` (the hand-off's journal key) inside its duplicate window.
Answers above the server's ``max_payload`` go through the object store bucket ``baton-answers``.

Credentials: ``settings.bus.creds`` (or ``BATON_BUS_CREDS``) names a NATS creds file; else
``BATON_BUS_USER``/``BATON_BUS_PASSWORD`` or ``BATON_BUS_TOKEN``. They are passed to the client and never
logged: server addresses are logged without their user part. TLS: ``tls://`` servers, checked against
``settings.bus.tls_ca`` (else the system's CAs), with ``tls_cert``/``tls_key`` when the server wants a
client certificate.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
from typing import Any
from urllib.parse import urlsplit

import anyio
import nats
from nats.js.api import ConsumerConfig, ObjectStoreConfig, StorageType, StreamConfig
from nats.js.errors import BadRequestError

from pipeline.engine.hosts import BusSettings, bus_servers

__all__ = ["BusLink", "BusUnreachable", "subject_token"]

log = logging.getLogger("batonpass")

SUBJECT_PREFIX = "baton.handoff"
ANSWERS_BUCKET = "baton-answers"
#: a republish after a crash within this window is dropped by the server (the target's journal drops later
#: ones)
DUPLICATE_WINDOW_S = 24 * 3600.0
#: hand-offs nobody consumed are kept this long on the stream
MAX_AGE_S = 7 * 24 * 3600.0
#: the consumer redelivers a message not acknowledged (nor marked in progress) for this long
ACK_WAIT_S = 10.0
#: room for the JSON around the text when deciding whether a message fits ``max_payload``
ENVELOPE_BYTES = 4096


def subject_token(name: str) -> str:
    """``name`` as one subject token: the characters NATS reserves ('.', '*', '>', spaces) and '%' escaped."""
    return re.sub(r"[.*>%\s]", lambda m: f"%{ord(m.group()):02X}", name)


def durable_name(host: str) -> str:
    """The host's durable consumer: consumer names allow fewer characters than subjects."""
    return "baton-" + re.sub(r"[^A-Za-z0-9_-]", lambda m: f"_{ord(m.group()):02X}", host)


def _why(exc: Exception) -> str:
    """What went wrong, in the words of the server or the TLS layer (never a credential: the log redacts)."""
    if isinstance(exc, ssl.SSLError | FileNotFoundError | PermissionError):
        return f"TLS: {exc}"
    text = str(exc).removeprefix("nats: ").strip("'\" ")
    if "Authorization Violation" in text:
        return ("the server refused the credentials: check settings.bus.creds or "
                "BATON_BUS_USER/_PASSWORD/_TOKEN")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def shown(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}:{parts.port or 4222}"


class BusUnreachable(Exception):
    """A read-only command's bus answered no connection (nothing listens, or the credentials are refused)."""


class BusLink:
    """One NATS connection for a daemon: stream, consumer and object store set up on first use.

    ``reader=True`` is a read-only command's (``status``/``history --all-hosts``): it creates no stream and
    logs no outage — it hands nothing off, so "hand-offs are kept and retried" would be untrue; a refusal of
    its credentials is kept in :attr:`refusal` for the command to say. ``quiet=True`` is a command's short use
    of the bus (an action): its connection and disconnection are no news."""

    def __init__(self, settings: BusSettings | None, *, reader: bool = False, quiet: bool = False) -> None:
        self.settings = settings or BusSettings()
        self.reader = reader
        self.quiet = quiet or reader
        #: why the server refused this connection ("" while it has not)
        self.refusal = ""
        self.servers = bus_servers(settings)
        self.nc: Any = None
        self.js: Any = None
        self._answers: Any = None
        self._refused = False
        #: a reader's last connection error, for the one line that says why it cannot read
        self._last = ""

    def describe(self) -> str:
        return ", ".join(shown(u) for u in self.servers)

    def _auth(self) -> dict[str, Any]:
        creds = os.environ.get("BATON_BUS_CREDS") or self.settings.creds
        if creds:
            return {"user_credentials": os.path.expanduser(creds)}
        if os.environ.get("BATON_BUS_TOKEN"):
            return {"token": os.environ["BATON_BUS_TOKEN"]}
        if os.environ.get("BATON_BUS_USER"):
            return {
                "user": os.environ["BATON_BUS_USER"],
                "password": os.environ.get("BATON_BUS_PASSWORD", ""),
            }
        return {}

    def _tls(self) -> dict[str, Any]:
        s = self.settings
        if not (s.tls_ca or s.tls_cert or any(u.startswith("tls://") for u in self.servers)):
            return {}
        context = ssl.create_default_context(cafile=os.path.expanduser(s.tls_ca) if s.tls_ca else None)
        if s.tls_cert and s.tls_key:
            context.load_cert_chain(os.path.expanduser(s.tls_cert), os.path.expanduser(s.tls_key))
        return {"tls": context}

    async def connect(self) -> None:
        """Connect, retrying until a server answers (a daemon may start before the bus does)."""
        delay, said = 0.2, False
        while True:
            try:
                self.nc = await nats.connect(
                    servers=self.servers,
                    allow_reconnect=True,
                    # a reader gives up after a second try: nothing listening is said at once, not in 5 s
                    max_reconnect_attempts=1 if self.reader else -1,
                    reconnect_time_wait=0.5,
                    connect_timeout=2,
                    name="batonpass",
                    error_cb=self._error,
                    disconnected_cb=self._disconnected,
                    reconnected_cb=self._reconnected,
                    **self._auth(),
                    **self._tls(),
                )
                break
            except Exception as exc:
                if self.reader:
                    raise BusUnreachable(self.refusal or self._last or _why(exc)) from None
                if not said:
                    log.warning("bus: cannot connect to %s (%s); retrying", self.describe(), _why(exc))
                    said = True
                await anyio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self._refused = False
        self.nc.options["max_reconnect_attempts"] = -1  # once there, a reader's board rides out outages
        self.js = self.nc.jetstream(timeout=5)
        if not self.reader:
            await self._stream()
        log.log(logging.DEBUG if self.quiet else logging.INFO, "bus: connected to %s (max_payload %d bytes)",
                shown(str(self.nc.connected_url.geturl())), self.nc.max_payload)

    async def _stream(self) -> None:
        config = StreamConfig(name=self.settings.stream, subjects=[f"{SUBJECT_PREFIX}.>"],
                              storage=StorageType.FILE, num_replicas=self.settings.replicas,
                              duplicate_window=DUPLICATE_WINDOW_S, max_age=MAX_AGE_S)
        while True:
            try:
                try:
                    await self.js.add_stream(config)
                except BadRequestError:  # it exists with other settings (made by another version): use it
                    await self.js.stream_info(self.settings.stream)
                return
            except Exception as exc:
                log.warning("bus: stream %s not ready (%s: %s); retrying", self.settings.stream,
                            type(exc).__name__, exc)
                await anyio.sleep(1.0)

    async def answers(self) -> Any:
        """The object store for answers above ``max_payload``."""
        if self._answers is None:
            try:
                self._answers = await self.js.object_store(ANSWERS_BUCKET)
            except Exception:
                self._answers = await self.js.create_object_store(
                    ANSWERS_BUCKET, config=ObjectStoreConfig(storage=StorageType.FILE,
                                                             replicas=self.settings.replicas, ttl=MAX_AGE_S))
        return self._answers

    def subject(self, host: str, tile: str) -> str:
        return f"{SUBJECT_PREFIX}.{subject_token(host)}.{subject_token(tile)}"

    async def consumer(self, host: str) -> Any:
        """The host's durable pull consumer over every tile's subject of that host."""
        config = ConsumerConfig(durable_name=durable_name(host), ack_wait=ACK_WAIT_S, max_deliver=-1,
                                filter_subject=f"{SUBJECT_PREFIX}.{subject_token(host)}.>")
        while True:
            try:
                return await self.js.pull_subscribe(config.filter_subject, durable=config.durable_name,
                                                    stream=self.settings.stream, config=config)
            except Exception as exc:
                log.warning("bus: consumer %s not ready (%s: %s); retrying", config.durable_name,
                            type(exc).__name__, exc)
                await anyio.sleep(1.0)

    @property
    def max_payload(self) -> int:
        return int(self.nc.max_payload) if self.nc is not None else 1024 * 1024

    async def close(self) -> None:
        """Close the connection (at most 2 s); a connection the bus already lost has nothing to flush."""
        if self.nc is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                try:
                    await self.nc.close()
                except (OSError, nats.errors.Error) as exc:
                    log.debug("bus: closed a lost connection (%s: %s)", type(exc).__name__, exc)

    async def _error(self, exc: Exception) -> None:
        """The client retries on its own; a refusal is said once (until a connection succeeds), the rest is
        detail for ``-v``."""
        if "Authorization Violation" in str(exc) and self.reader:
            self.refusal = _why(exc)
        elif "Authorization Violation" in str(exc) and not self._refused:
            self._refused = True
            log.warning("bus: %s: %s; hand-offs are kept and retried", self.describe(), _why(exc))
        else:
            self._last = _why(exc)
            log.debug("bus: %s: %s", type(exc).__name__, exc)

    async def _disconnected(self) -> None:
        if self.quiet:
            log.debug("bus: disconnected from %s", self.describe())
            return
        log.warning("bus: disconnected from %s; hand-offs are kept and retried", self.describe())

    async def _reconnected(self) -> None:
        self._refused = False
        log.info("bus: reconnected to %s", shown(str(self.nc.connected_url.geturl())))
