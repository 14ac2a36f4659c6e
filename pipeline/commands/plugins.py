"""``baton plugins``: the loaded agent adapters and transforms, where each comes from, and plugins that
failed to load or were disabled."""

from __future__ import annotations

import argparse
import os

from pipeline.cmdline.output import json_text, table
from pipeline.plugin.manager import load_registries, make_plugin_manager

__all__ = ["plugins_command"]


def plugins_command(args: argparse.Namespace) -> int:
    pm = make_plugin_manager()
    registries = load_registries(pm)
    rows = []
    for kind, registry in (("agent", registries.agents), ("transform", registries.transforms)):
        for name in registry.names():
            rows.append({"kind": kind, "name": name, "from": registry.origin(name),
                         "summary": registry.summary(name)})
    failed = [{"name": e.name, "from": e.origin, "error": e.error} for e in pm.failed()]
    if args.json:
        print(json_text({"plugins": [pm.get_name(p) for p in pm.get_plugins()], "classes": rows,
                         "failed": failed, "disabled": pm.disabled}))
        return 0
    print(
        table(
            ("KIND", "NAME", "FROM", "SUMMARY"),
            [(r["kind"], r["name"], r["from"], r["summary"]) for r in rows]
            + [("plugin", f["name"], f["from"], f"failed: {f['error']}") for f in failed],
        )
    )
    if os.environ.get("BATON_DISABLE_EXTERNAL_PLUGINS") == "1":
        print("(external plugins disabled by BATON_DISABLE_EXTERNAL_PLUGINS=1)")
    if pm.disabled:
        print(f"(disabled by BATON_DISABLED_PLUGINS: {', '.join(pm.disabled)})")
    return 0
