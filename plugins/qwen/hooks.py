"""``baton hooks install --agent qwen``: Qwen Code's Stop, StopFailure and Notification hooks, pointing at
batonpass's hook spool, in ``$QWEN_HOME/settings.json`` (default ``~/.qwen/settings.json``).

Stop runs once a turn ends with an answer (not after an interrupt), StopFailure instead when an API error or
a loop ends it, Notification (``permission_prompt``) when a tool waits for approval — and ``idle_prompt``
after each turn, which batonpass ignores. Each carries ``session_id``, ``transcript_path`` and, for a turn,
``prompt_id`` (``<session>########N``). The hook runs ``python -m pipeline.spool qwen``, which writes its
stdin and ``$TMUX_PANE`` into the spool and exits 0 at once, printing nothing (Qwen Code reads a hook's
stdout as its decision).
"""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.plugin.hook_settings import install_command_hooks

__all__ = ["EVENTS", "HOOK_MARK", "install_hooks", "qwen_dir"]

HOOK_MARK = "-m pipeline.spool qwen"
EVENTS = ("Stop", "StopFailure", "Notification")


def qwen_dir() -> Path:
    return Path(os.environ.get("QWEN_HOME") or Path(os.path.expanduser("~")) / ".qwen").expanduser()


def install_hooks(settings: Path, hook_command: list[str]) -> str:
    """Add the batonpass hooks to Qwen Code's ``settings``, keeping everything else (idempotent)."""
    return install_command_hooks(settings, EVENTS, hook_command, HOOK_MARK)
