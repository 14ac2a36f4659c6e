"""``baton run``: the routing daemon in the foreground (:mod:`pipeline.engine.daemon`), on this host's
tiles; SIGINT/SIGTERM end it with exit status 0."""

from __future__ import annotations

import argparse
import sys

import anyio

from pipeline.cmdline.config import config_path, load, no_tiles_on, tmux_for
from pipeline.plugin.manager import load_registries

__all__ = ["run_command"]


def run_command(args: argparse.Namespace) -> int:
    from pipeline.engine.daemon import run_daemon

    registries = load_registries()
    config, _ = load(args, registries)
    if config is None:
        return 1
    if note := no_tiles_on(config, args.host):  # it runs on: a reload may bring this host's tiles
        print(f"baton run: {note}", file=sys.stderr)
    anyio.run(lambda: run_daemon(config, config_path(args), registries, lambda c: tmux_for(args, c),
                                 dry_run=args.dry_run, host=args.host))
    return 0
