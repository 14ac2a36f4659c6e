"""``baton bus``: a local nats-server with JetStream (:mod:`pipeline.bus.server`), for routes that cross
hosts; it runs in the foreground until stopped."""

from __future__ import annotations

import argparse
import sys

__all__ = ["bus_command"]


def bus_command(args: argparse.Namespace) -> int:
    from pipeline.bus.server import NoServerBinary, serve
    from pipeline.engine.hosts import local_host

    try:
        serve(args.listen, args.port, args.name or f"batonpass-{local_host()}")
    except (NoServerBinary, OSError) as exc:
        print(f"baton bus: {exc}", file=sys.stderr)
        return 1
    return 0
