"""``baton hooks install --agent gemini``: Gemini CLI's AfterAgent and Notification hooks, pointing at
batonpass's hook spool, in ``$GEMINI_CLI_HOME/.gemini/settings.json`` (default ``~/.gemini``).

AfterAgent runs once per user turn, after its final answer and after an interrupt (its ``prompt_response``
is garbled: the answer is read from the session file); Notification (``ToolPermission``) when a tool waits
for approval. Both carry ``session_id`` and ``transcript_path``. The hook runs ``python -m pipeline.spool
gemini``, which writes its stdin and ``$TMUX_PANE`` into the spool and exits 0 at once, printing nothing
(Gemini CLI reads a hook's stdout as its decision).
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from pipeline.plugin.tools import write_json

__all__ = ["EVENTS", "HOOK_MARK", "gemini_dir", "install_hooks"]

HOOK_MARK = "-m pipeline.spool gemini"
EVENTS = ("AfterAgent", "Notification")


def gemini_dir() -> Path:
    home = os.environ.get("GEMINI_CLI_HOME") or os.path.expanduser("~")
    return Path(home) / ".gemini"


def _load(settings: Path) -> dict[str, Any]:
    if not settings.exists():
        return {}
    try:
        data = json.loads(settings.read_text(encoding="utf-8") or "{}")
    except ValueError as exc:
        raise ValueError(f"{settings} is not valid JSON ({exc}); nothing was changed") from None
    if not isinstance(data, dict):
        raise ValueError(f"{settings} does not hold a JSON object; nothing was changed")
    return data


def _put(entries: list[Any], command: str) -> str:
    """Add or update the batonpass hook among one event's ``entries``: what happened, in a word."""
    for entry in entries:
        for hook in entry.get("hooks", []) if isinstance(entry, dict) else []:
            if isinstance(hook, dict) and str(hook.get("command", "")).endswith(HOOK_MARK):
                if hook["command"] == command:
                    return "kept"
                hook["command"] = command
                return "updated"
    entries.append({"hooks": [{"type": "command", "command": command}]})
    return "added"


def install_hooks(settings: Path, hook_command: list[str]) -> str:
    """Add the batonpass hooks to Gemini CLI's ``settings``, keeping everything else. Idempotent; a file
    that is not a JSON object (or whose ``hooks`` are of another shape) is not touched."""
    data = _load(settings)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError(f"{settings}: hooks is not an object; nothing was changed")
    if any(not isinstance(hooks.get(e, []), list) for e in EVENTS):
        raise ValueError(f"{settings}: hooks.AfterAgent/Notification is not a list; nothing was changed")
    command = shlex.join(hook_command)
    done = {event: _put(hooks.setdefault(event, []), command) for event in EVENTS}
    if all(what == "kept" for what in done.values()):
        return f"{settings}: the batonpass AfterAgent and Notification hooks are already installed"
    write_json(settings, data)
    return f"{settings}: " + ", ".join(f"{what} the {event} hook" for event, what in done.items()) + \
        f" running {command}"

