"""Codex, seen from its screen. (The rollout-based adapter builds on this.)"""

from __future__ import annotations

import re

from pipeline.markers import hookimpl
from plugins.terminal import TerminalAdapter

__all__ = ["CodexAdapter"]


class CodexAdapter(TerminalAdapter):
    name = "codex"
    summary = "OpenAI Codex CLI"
    process_names = frozenset({"codex"})
    submit_delay_s = 0.2
    # SPEC §6: nothing shows while the answer streams, so quiet time matters more than the marker
    busy_markers = ("esc to interrupt",)
    input_line = re.compile(r"^›\s?(.*)$")
    placeholders = ("Ask Codex to do anything",)
    quiet_s = 2.0


@hookimpl
def register_agents(register) -> None:
    register(CodexAdapter)
