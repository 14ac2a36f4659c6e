"""``baton web``: the live board in a browser, with its actions (:mod:`pipeline.web`), until Ctrl-C.

It listens on 127.0.0.1 unless told otherwise with ``--public``; the token in the URL it prints is kept
0600 in the state folder (the journal's) and made on the first start, so a bookmark keeps working.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import secrets
import signal
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.abc

from pipeline.cmdline.config import config_path, load, this_host, tmux_for
from pipeline.engine.config import Config
from pipeline.engine.hosts import bus_servers, local_host
from pipeline.plugin.manager import load_registries
from pipeline.spool import state_dir

__all__ = ["read_token", "web_command"]

TOKEN_FILE = "web-token"


def read_token(folder: Path | None = None) -> str:
    """The page's token: read from the state folder, or made there (0600) on the first start."""
    folder = folder or state_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / TOKEN_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if path.stat().st_mode & 0o077:
            os.chmod(path, 0o600)
        token = path.read_text().strip()
        if len(token) >= 16:
            return token
        path.unlink()  # empty or cut short: a new one
        return read_token(folder)
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def web_command(args: argparse.Namespace) -> int:
    """0 when stopped by Ctrl-C or SIGTERM; 1 when routes.yaml is invalid or the port is taken; 2 for an
    address beyond this machine without ``--public``."""
    if not _loopback(args.host) and not args.public:
        print(f"baton web: {args.host} is reachable from other machines: add --public to mean it (and put "
              "TLS in front), or leave --host out for 127.0.0.1", file=sys.stderr)
        return 2
    registries = load_registries()
    config, _ = load(args, registries)
    if config is None:
        return 1
    try:
        sock = socket.create_server((args.host, args.port))
    except OSError as exc:
        print(f"baton web: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        token = read_token()
    except OSError as exc:
        print(f"baton web: cannot keep the token in {state_dir()}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    port = sock.getsockname()[1]
    shown = socket.gethostname() if args.host in ("0.0.0.0", "::") else args.host
    shown = f"[{shown}]" if ":" in shown else shown
    with sock:
        return anyio.run(_serve, args, config, registries, sock, f"http://{shown}:{port}/?token={token}")


class _Stop:
    """What a Ctrl-C stops: everything at once while starting; once serving, the server gracefully (its
    pages' streams ended first, so that it need not wait for them)."""

    def __init__(self, scope: anyio.CancelScope) -> None:
        self.scope = scope
        self.server: Any = None
        self.feed: Any = None

    async def on_signal(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            task_status.started()
            async for _ in signals:
                if self.server is None:
                    self.scope.cancel()
                    return
                self.feed.close()
                self.server.should_exit = True
                return


async def _serve(args: argparse.Namespace, whole: Config, registries: Any, sock: socket.socket,
                 url: str) -> int:
    from pipeline.engine.tiles import build_tiles
    from pipeline.web.app import Guard
    from pipeline.web.feed import WebFeed

    config = this_host(whole, None)
    token = url.rsplit("=", 1)[1]
    async with anyio.create_task_group() as tg:
        stop = _Stop(tg.cancel_scope)
        await tg.start(stop.on_signal)
        tiles = await build_tiles(config, registries.agents, tmux_for(args, config))
        async with _bus(whole) as link:
            stop.feed = WebFeed(config, tiles, local_host(), link)
            stop.server = _server(stop.feed, Guard(token, sock.getsockname()[1], public=args.public),
                                  config_path(args))
            async with anyio.create_task_group() as serving:
                serving.start_soon(stop.feed.run)
                print(f"baton web: {url}", flush=True)
                if args.public:
                    print("baton web: listening beyond this machine: the token and every answer travel in "
                          "clear — put TLS in front (a reverse proxy with HTTPS)", flush=True)
                await stop.server.serve(sockets=[sock])
                serving.cancel_scope.cancel()
        tg.cancel_scope.cancel()
    return 0


def _server(feed: Any, guard: Any, path: Path) -> Any:
    """uvicorn's server for the app, the signals left to ``baton`` (uvicorn would raise them again)."""
    import uvicorn

    from pipeline.web.app import make_app

    class Server(uvicorn.Server):
        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    app = make_app(feed, guard, _performer(path))
    return Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                 timeout_graceful_shutdown=1))


class _bus:  # noqa: N801 - used as `async with _bus(config) as link`
    """The bus connection when one is configured (every host's tiles), else None; a bus that does not
    answer is said once and the page shows this host's tiles."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.link: Any = None

    async def __aenter__(self) -> Any:
        if not bus_servers(self.config.settings.bus):
            return None
        from pipeline.bus.link import BusLink
        from pipeline.views.all_hosts import REACH_S

        link = BusLink(self.config.settings.bus)
        try:
            with anyio.fail_after(REACH_S):
                await link.connect()
        except Exception as exc:
            print(f"baton web: the bus at {', '.join(bus_servers(self.config.settings.bus))} did not answer "
                  f"({exc or type(exc).__name__}): showing this host's tiles only", file=sys.stderr)
            return None
        self.link = link
        return link

    async def __aexit__(self, *exc: object) -> None:
        if self.link is not None:
            with anyio.CancelScope(shield=True):
                await self.link.close()


def _performer(path: Path) -> Any:
    """``perform(kind, target, text, origin)``: the actions' own code (:mod:`pipeline.engine.actions`)."""

    async def perform(kind: str, target: str, text: str | None, origin: str) -> tuple[bool, str]:
        from pipeline.engine.actions import Action, ActionKind, perform

        result = await perform(Action(cast(ActionKind, kind), target, text, origin), config_path=path)
        return result.ok, result.message

    return perform
