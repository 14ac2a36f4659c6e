"""Claude Code, seen from its screen. (The transcript-based resolution chain builds on this.)"""

from __future__ import annotations

import re

from pipeline.markers import hookimpl
from plugins.terminal import TerminalAdapter

__all__ = ["ClaudeCodeAdapter"]


class ClaudeCodeAdapter(TerminalAdapter):
    name = "claude"
    summary = "Claude Code"
    process_names = frozenset({"claude", "claude.exe"})
    # SPEC §5: Claude Code needs >= 150 ms between paste and Enter
    submit_delay_s = 0.3
    busy_markers = ("esc to interrupt",)
    input_line = re.compile(r"^❯\s?(.*)$")


@hookimpl
def register_agents(register) -> None:
    register(ClaudeCodeAdapter)
