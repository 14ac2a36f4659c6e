"""``baton check``: validate routes.yaml; every problem at its line and column, or a one-line verdict."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

from pipeline.cmdline.config import config_path, load, no_config_here, tmux_for
from pipeline.cmdline.output import json_text
from pipeline.plugin.manager import load_registries
from pipeline.system.text import count
from pipeline.views.pane_warnings import pane_warnings
from pipeline.views.route_graph import mermaid

__all__ = ["check_command"]


def check_command(args: argparse.Namespace) -> int:
    """0 when routes.yaml is valid (warnings allowed), 1 when it is not."""
    from pipeline.engine.config import ConfigError, load_config

    registries = load_registries()
    if not args.json:
        config, warnings = load(args, registries)
        if config is None:
            return 1
        if args.graph:
            print(mermaid(config), end="")
            return 0
        live = pane_warnings(config, registries, tmux_for(args, config))  # the tiles' live panes
        for problem in live:
            print(problem, file=sys.stderr)
        warnings = [*warnings, *live]
        print(f"{config.path}: ok — {count(len(config.tiles), 'tile')}, {count(len(config.routes), 'route')}"
              + (f", {count(len(warnings), 'warning')}" if warnings else ""))
        print(f"limits: max_hops {config.settings.hop_limit}"
              + "".join(f"; {label} at most {n} an hour" for label, n in config.rate_limits().items()))
        return 0
    path = config_path(args)
    out: dict[str, Any]
    try:
        config, problems = load_config(path, registries)
        problems = [*problems, *pane_warnings(config, registries, tmux_for(args, config))]
        out = {"file": str(path), "ok": True, "tiles": len(config.tiles), "routes": len(config.routes),
               "limits": {"max_hops": config.settings.hop_limit, "max_per_hour": config.rate_limits()}}
        if args.graph:
            out["graph"] = mermaid(config)
    except ConfigError as exc:
        problems, out = exc.problems, {"file": str(path), "ok": False}
        if args.config is None and not path.exists():
            problems = [replace(problems[0], message=no_config_here())]
    out["problems"] = [
        {"line": p.line, "col": p.col, "severity": p.severity, "path": p.path, "message": p.message}
        for p in problems
    ]
    print(json_text(out))
    return 0 if out["ok"] else 1
