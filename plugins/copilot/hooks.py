"""``baton hooks install --agent copilot``: Copilot CLI's ``agentStop`` and ``notification`` hooks,
pointing at batonpass's hook spool.

Copilot reads every ``$COPILOT_HOME/hooks/*.json`` (``{"version": 1, "hooks": {<event>: [{"type":
"command", "bash": …, "timeoutSec": …}]}}``, tests/fixtures/copilot-1.0.102), so batonpass owns one file of
its own there, ``batonpass.json``, and touches no other. The hook's stdin carries no event name:
``agentStop`` is told by its ``transcriptPath`` and ``stopReason``, ``notification`` by its
``notificationType`` (:func:`hook_kind`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.plugin.tools import write_json

__all__ = ["HOOK_EVENTS", "hook_kind", "install_copilot_hooks"]

#: the events batonpass listens to: the end of a user turn, and a person being asked
HOOK_EVENTS = ("agentStop", "notification")
FILE_NAME = "batonpass.json"


def hook_kind(payload: dict[str, Any]) -> str | None:
    """``agentStop``, ``notification`` or None (another hook, or not Copilot's) from a hook's stdin."""
    if isinstance(payload.get("transcriptPath"), str) and "stopReason" in payload:
        return "agentStop"
    if isinstance(payload.get("notificationType"), str) or payload.get("hook_event_name") == "Notification":
        return "notification"
    return None


def install_copilot_hooks(home: Path, command: str) -> str:
    """Write ``home/hooks/batonpass.json`` running ``command`` for :data:`HOOK_EVENTS`. Idempotent; a file
    of that name that is not batonpass's JSON is not overwritten."""
    path = home / "hooks" / FILE_NAME
    wanted = {"version": 1, "hooks": {event: [{"type": "command", "bash": command, "timeoutSec": 10}]
                                      for event in HOOK_EVENTS}}
    if path.exists():
        try:
            current = json.loads(path.read_text(encoding="utf-8") or "{}")
        except ValueError as exc:
            raise ValueError(f"{path} is not valid JSON ({exc}); nothing was changed") from None
        if current == wanted:
            return f"{path}: the batonpass hooks are already installed"
    write_json(path, wanted)
    return (f"{path}: agentStop and notification hooks run {command} "
            "(a Copilot already running may need a restart to read it)")
