"""Tiles on several machines: which host runs which tile, and the bus that joins them (config side only).

One routes.yaml serves every host. A tile may name its ``host:``; a tile that names none belongs to the
machine ``baton run`` runs on. A route whose two tiles name different hosts *crosses hosts*: its prompts
travel over the bus (NATS JetStream, :mod:`pipeline.bus`), which ``settings.bus`` or ``BATON_BUS_URL``
names. Credentials come from a creds file or the environment and are never part of the config's data that
is logged or journalled. Nothing here imports the NATS client: a single-machine setup never loads it.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pipeline.system.jsonl import json_list, json_object

__all__ = ["BUS_URL_ENV", "NO_BUS_CLIENT", "BusSettings", "bus_servers", "crossing_problems", "host_problem",
           "local_host", "no_bus_client", "tile_host"]

BUS_URL_ENV = "BATON_BUS_URL"


class BusSettings(BaseModel):
    """``settings.bus``: where the NATS servers are. Secrets stay outside routes.yaml: ``creds`` names a
    NATS creds file; ``BATON_BUS_USER``/``BATON_BUS_PASSWORD`` or ``BATON_BUS_TOKEN`` are read at connect."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: list[str] = Field(default_factory=list, description="nats://HOST:PORT, one per cluster node")
    creds: str | None = Field(default=None, description="a NATS .creds file (JWT and NKey seed)")
    #: TLS (servers named tls://…): the CA that signed the servers' certificates (default: the system's),
    #: and this host's certificate and key when the servers ask for one (mutual TLS)
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    #: the JetStream stream holding the hand-offs (3 replicas on a 3-node cluster)
    stream: str = "BATON"
    replicas: int = Field(default=1, ge=1, le=5, strict=True)

    @model_validator(mode="after")
    def _cert_with_key(self) -> BusSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together (this host's certificate and its key)")
        return self

    @field_validator("servers", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("servers")
    @classmethod
    def _urls(cls, servers: list[str]) -> list[str]:
        for url in servers:
            if "://" not in url:
                raise ValueError(f"{url!r} is not a URL; write nats://HOST:4222")
        return servers


def local_host() -> str:
    """The name ``baton run`` uses when ``--host`` is not given: the machine's host name."""
    return socket.gethostname()


def tile_host(tile: Any, here: str) -> str:
    """The host that runs ``tile`` (a tile naming none runs where ``baton run`` runs)."""
    return getattr(tile, "host", None) or here


#: why a command that needs the bus cannot run without the optional NATS client (``import nats`` failed)
NO_BUS_CLIENT = ("the bus (settings.bus or BATON_BUS_URL; tiles with a `host:` of another machine) needs the "
                 "NATS client: pip install 'batonpass[bus]'")


def no_bus_client(exc: BaseException) -> bool:
    """``exc`` is the missing optional NATS client (``pip install 'batonpass[bus]'`` was not run)."""
    return isinstance(exc, ModuleNotFoundError) and (exc.name or "").partition(".")[0] == "nats"


def bus_servers(bus: BusSettings | None) -> list[str]:
    """``BATON_BUS_URL`` (comma-separated) wins over ``settings.bus.servers``."""
    env = os.environ.get(BUS_URL_ENV, "").strip()
    if env:
        return [u.strip() for u in env.split(",") if u.strip()]
    return list(bus.servers) if bus is not None else []


def host_problem(host: Any) -> str:
    """Why ``host`` cannot name a machine ("" when it can): it becomes part of NATS subject names."""
    if not isinstance(host, str):
        return ""
    if not host.strip():
        return "the host is empty; leave `host:` out for the machine baton run runs on"
    if any(c.isspace() for c in host) or any(c in host for c in "*>"):
        return f"host {host!r} has spaces or a '*' or '>' in it"
    return ""


def crossing_problems(data: dict[str, Any], positions: Any) -> list[Any]:
    """A route between tiles on two named hosts needs a bus; tiles that name no host while a route crosses
    hosts run on every host's ``baton run`` (a warning: they would be followed twice)."""
    tiles = json_object(data.get("tiles"))
    problems = []
    for name, tile in tiles.items():
        why = host_problem(tile.get("host")) if isinstance(tile, dict) else ""
        if why:
            problems.append(positions.problem(("tiles", name, "host"), why))
    crossings = _crossings(tiles, json_list(data.get("routes")))
    if not _has_bus(json_object(data.get("settings"))):
        for i, a, b in crossings:
            problems.append(positions.problem(
                ("routes", i, "to"), f"route crosses hosts ({a} -> {b}) but no bus is configured; set "
                f"settings.bus.servers or {BUS_URL_ENV} (nats://HOST:4222; `baton bus` starts one)"))
    if crossings:
        for name, tile in tiles.items():
            if isinstance(tile, dict) and not tile.get("host"):
                problems.append(positions.problem(
                    ("tiles", name), f"tile {name!r} names no host while routes cross hosts: every host's "
                    "baton run will follow it; give it `host:`", severity="warning"))
    return problems


def _crossings(tiles: dict[str, Any], routes: list[Any]) -> list[tuple[int, str, str]]:
    """The routes between tiles on two different named hosts: (index, from host, to host)."""

    def host(name: Any) -> str | None:
        tile = tiles.get(name) if isinstance(name, str) else None
        value = tile.get("host") if isinstance(tile, dict) else None
        return value if isinstance(value, str) else None

    found = []
    for i, route in enumerate(routes):
        if not isinstance(route, dict):
            continue
        a, b = host(route.get("from")), host(route.get("to"))
        if a is not None and b is not None and a != b:
            found.append((i, a, b))
    return found


def _has_bus(settings: dict[str, Any]) -> bool:
    """A bus is configured: in the environment or as ``settings.bus.servers``."""
    return bool(os.environ.get(BUS_URL_ENV, "").strip()) or (
        isinstance(settings.get("bus"), dict) and bool(settings["bus"].get("servers")))
