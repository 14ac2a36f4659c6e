"""``baton hooks install``: each agent's own completion hook, pointing at the hook spool.

Driven by the registry: ``--agent NAME`` names any registered adapter, a third-party one included
(``--claude`` and ``--codex`` are aliases); without it, every adapter that has hooks
(:meth:`AgentAdapter.has_hooks`) installs them. The hook runs ``python -m pipeline.spool NAME``.
"""

from __future__ import annotations

import argparse
import sys

from pipeline.plugin.manager import Registries, load_registries

__all__ = ["hook_command", "install_command", "install_hooks"]


def hook_command(agent: str) -> list[str]:
    """What an agent's hook runs: this Python, writing one record for ``agent`` into the spool."""
    return [sys.executable, "-m", "pipeline.spool", agent]


def install_hooks(registries: Registries, agents: list[str]) -> int:
    """Install the hooks of ``agents`` (default: every agent that has hooks); one line per agent, exit 1
    when any could not be installed (an unknown name is the caller's one-line error)."""
    names = list(dict.fromkeys(agents)) or [n for n in registries.agents.names()
                                            if registries.agents.get(n).has_hooks()]
    classes = [registries.agents.get(n) for n in names]  # an unknown name fails before anything is written
    status = 0
    for name, cls in zip(names, classes, strict=True):
        if not cls.has_hooks():
            print(f"baton hooks install --agent {name}: the {name} adapter has no hooks to install "
                  f"(batonpass follows it without one)", file=sys.stderr)
            status = 1
            continue
        try:
            print(cls.install_hooks(hook_command(name)))
        except (NotImplementedError, OSError, ValueError) as exc:
            print(f"baton hooks install --agent {name}: {exc}", file=sys.stderr)
            status = 1
    return status


def install_command(args: argparse.Namespace) -> int:
    return install_hooks(load_registries(), args.agents)
