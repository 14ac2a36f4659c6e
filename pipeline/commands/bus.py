"""``baton bus``: a local nats-server with JetStream (:mod:`pipeline.bus.server`), for routes that cross
hosts; it runs in the foreground until stopped."""

from __future__ import annotations

import argparse
import errno
import socket
import sys

__all__ = ["bus_command"]


def bus_command(args: argparse.Namespace) -> int:
    from pipeline.bus.server import NoServerBinary, serve
    from pipeline.engine.hosts import local_host

    taken = _cannot_listen(args.listen, args.port)
    if taken:
        print(f"baton bus: {taken}", file=sys.stderr)
        return 1
    try:
        serve(args.listen, args.port, args.name or f"batonpass-{local_host()}")
    except (NoServerBinary, OSError) as exc:
        print(f"baton bus: {exc}", file=sys.stderr)
        return 1
    return 0


def _cannot_listen(listen: str, port: int) -> str:
    """Why nats-server could not listen there ("" when it can): said in one line before its start-up line
    and banner, which would otherwise announce a bus that then exits."""
    try:
        infos = socket.getaddrinfo(listen, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return f"--listen {listen}: {exc.strerror}"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as nats-server does
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (f"port {port} on {listen} is in use (a baton bus or nats-server runs there "
                        "already?): use that one, or pick another with --port")
            return f"cannot listen on {listen}:{port}: {exc.strerror or exc}"
    return ""
