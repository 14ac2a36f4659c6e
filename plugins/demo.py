"""The agent adapter for the demo agent (``plugins.demo_agent``), read from its screen like any TUI."""

from __future__ import annotations

import re

from pipeline.markers import hookimpl
from plugins.terminal import TerminalAdapter

__all__ = ["DemoAdapter"]


class DemoAdapter(TerminalAdapter):
    name = "demo"
    summary = "the built-in demo agent (baton demo)"
    process_names = frozenset({"baton-demo"})
    busy_markers = ("esc to interrupt",)
    input_line = re.compile(r"^demo❯\s?(.*)$")
    submit_delay_s = 0.1
    quiet_s = 0.5
    tick_s = 0.1


@hookimpl
def register_agents(register) -> None:
    register(DemoAdapter)
