"""What a one-pane command (``baton send``, ``baton resolve``) works with, from its arguments: the plugins,
routes.yaml (``./routes.yaml`` or ``-c FILE``) when there is one, and the tmux server; which pane a name means
and which agent is expected there is :mod:`pipeline.engine.pane_target`'s.
"""

from __future__ import annotations

import argparse

from pipeline.cmdline.config import load_optional, tmux_for
from pipeline.engine.pane_target import Setup
from pipeline.plugin.manager import load_registries

__all__ = ["target_setup"]


def target_setup(args: argparse.Namespace) -> Setup | None:
    """What a one-pane command needs; None when routes.yaml is named or found and broken (said already)."""
    registries = load_registries()
    if args.agent != "auto":
        registries.agents.get(args.agent)  # an unknown name: one line from main(), before anything else
    config, ok = load_optional(args, registries)
    if not ok:
        return None
    # -L/-S naming another server than routes.yaml's: a %N there is not a tile's pane
    other_server = config is not None and (args.socket_path is not None or args.socket not in (
        None, config.tmux.socket_name))
    tiles = {} if config is None or other_server else dict(config.tiles)
    return Setup(registries, config, tmux_for(args, config), tiles)
