"""``baton hooks install --agent gemini``: Gemini CLI's AfterAgent and Notification hooks, pointing at
batonpass's hook spool, in ``$GEMINI_CLI_HOME/.gemini/settings.json`` (default ``~/.gemini``).

AfterAgent runs once per user turn, after its final answer and after an interrupt (its ``prompt_response``
is garbled: the answer is read from the session file); Notification (``ToolPermission``) when a tool waits
for approval. Both carry ``session_id`` and ``transcript_path``. The hook runs ``python -m pipeline.spool
gemini``, which writes its stdin and ``$TMUX_PANE`` into the spool and exits 0 at once, printing nothing
(Gemini CLI reads a hook's stdout as its decision).
"""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.plugin.hook_settings import install_command_hooks

__all__ = ["EVENTS", "HOOK_MARK", "gemini_dir", "install_hooks"]

HOOK_MARK = "-m pipeline.spool gemini"
EVENTS = ("AfterAgent", "Notification")


def gemini_dir() -> Path:
    home = os.environ.get("GEMINI_CLI_HOME") or os.path.expanduser("~")
    return Path(home) / ".gemini"


def install_hooks(settings: Path, hook_command: list[str]) -> str:
    """Add the batonpass hooks to Gemini CLI's ``settings``, keeping everything else. Idempotent; a file
    that is not a JSON object (or whose ``hooks`` are of another shape) is not touched."""
    return install_command_hooks(settings, EVENTS, hook_command, HOOK_MARK)
