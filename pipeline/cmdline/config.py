"""Which routes.yaml and which tmux server a command talks to — decided one way for every command.

The tmux server: ``-L NAME`` or ``-S PATH`` on the command line, else routes.yaml's ``tmux.socket_name``,
else the server of ``$TMUX`` (when run inside tmux), else tmux's default server. Commands that do not need
routes.yaml (``send``, ``resolve``) still read it when there is one, for its socket name — so inside a
folder whose routes.yaml names a server, ``baton resolve %0`` looks at that server.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pipeline.engine.config import Config, ConfigError, Problem, default_config_path, load_config
from pipeline.plugin.manager import Registries
from pipeline.system.tmux import Tmux

__all__ = ["config_path", "load", "load_optional", "no_config_here", "no_tiles_on", "this_host", "tmux_for"]


def config_path(args: argparse.Namespace) -> Path:
    return Path(args.config) if args.config else default_config_path()


def load(args: argparse.Namespace, registries: Registries,
         warn: bool = True) -> tuple[Config | None, list[Problem]]:
    """The config, its warnings printed (``warn``); None (every problem printed, with a count) when it is
    invalid."""
    path = config_path(args)
    if args.config is None and not path.exists():
        print(f"baton {getattr(args, 'command', '')}: {no_config_here()}".replace("baton : ", "baton: "),
              file=sys.stderr)
        return None, []
    try:
        config, warnings = load_config(path, registries)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        errors = sum(p.severity == "error" for p in exc.problems)
        print(f"{path}: {errors} error{'s' * (errors != 1)}", file=sys.stderr)
        return None, exc.problems
    for problem in warnings if warn else ():
        print(problem, file=sys.stderr)
    return config, warnings


def no_config_here() -> str:
    """What a first run without a routes.yaml is told: where batonpass looked, and the ways on."""
    xdg = os.environ.get("XDG_CONFIG_HOME") or "~/.config"
    return (f"no routes.yaml in {os.getcwd()} (nor in {xdg}/batonpass/): write one that names your tiles "
            "and routes (batonpass's own routes.yaml is a commented example; `baton check` validates it), "
            "name one with -c FILE, or see it work first with `baton demo`, which needs none")


def load_optional(args: argparse.Namespace, registries: Registries) -> tuple[Config | None, bool]:
    """For commands that can run without routes.yaml: (config or None, ok). Not ok when a file was named
    with ``-c`` or found and it is invalid: a server named in a broken file must not be silently skipped."""
    path = config_path(args)
    if args.config is None and not path.exists():
        return None, True
    # read for its tmux server only: warnings about its routes (a key not set) are not this command's
    config, _ = load(args, registries, warn=False)
    return config, config is not None


def tmux_for(args: argparse.Namespace, config: Config | None) -> Tmux:
    socket = args.socket or (None if args.socket_path else (config.tmux.socket_name if config else None))
    return Tmux(socket_name=socket, socket_path=args.socket_path)


def this_host(config: Config, host: str | None) -> Config:
    """Only the tiles of ``host`` (default: this machine): a tile on another machine has no pane here."""
    from pipeline.engine.hosts import local_host

    return config.on_host(host or local_host())


def no_tiles_on(config: Config, host: str | None) -> str | None:
    """Why no tile of ``config`` is on ``host`` (default: this machine), with the way on; None when some
    are. A mistyped ``--host`` (or a machine whose name is not the one routes.yaml gives it) otherwise
    shows as an empty table, or nothing at all."""
    from pipeline.engine.hosts import local_host

    here = host or local_host()
    if config.tiles_on(here):
        return None
    if not config.tiles:
        return f"{config.path} names no tiles"
    hosts = sorted({t.host for t in config.tiles.values() if t.host})
    which = f"host {here!r}" if host else f"this machine (host {here!r})"
    return (f"none of the {len(config.tiles)} tiles of {config.path} is on {which}: they are on "
            f"{', '.join(hosts)}; name one with --host NAME")
