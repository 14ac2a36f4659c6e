"""``baton hooks install`` for agents whose settings file holds Claude-style command hooks (Gemini CLI, Qwen
Code): ``{"hooks": {"<Event>": [{"hooks": [{"type": "command", "command": "…"}]}]}}``.

The batonpass hook is the one whose command ends with its mark (``-m pipeline.spool NAME``); installing adds
it to each event, or updates its command, keeping every other hook and setting. A file that is not a JSON
object, or whose hooks are of another shape, is not touched.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from pipeline.system.jsonl import write_json

__all__ = ["install_command_hooks", "load_settings"]


def load_settings(settings: Path) -> dict[str, Any]:
    """An agent's settings file as a JSON object ({} when missing); ValueError when it is not one (then
    nothing may be changed)."""
    if not settings.exists():
        return {}
    try:
        data = json.loads(settings.read_text(encoding="utf-8") or "{}")
    except ValueError as exc:
        raise ValueError(f"{settings} is not valid JSON ({exc}); nothing was changed") from None
    if not isinstance(data, dict):
        raise ValueError(f"{settings} does not hold a JSON object; nothing was changed")
    return data


def _put(entries: list[Any], command: str, mark: str) -> str:
    """Add or update the batonpass hook among one event's ``entries``: what happened, in a word."""
    for entry in entries:
        for hook in entry.get("hooks", []) if isinstance(entry, dict) else []:
            if isinstance(hook, dict) and str(hook.get("command", "")).endswith(mark):
                if hook["command"] == command:
                    return "kept"
                hook["command"] = command
                return "updated"
    entries.append({"hooks": [{"type": "command", "command": command}]})
    return "added"


def _names(events: tuple[str, ...]) -> str:
    return events[0] if len(events) == 1 else ", ".join(events[:-1]) + f" and {events[-1]}"


def install_command_hooks(settings: Path, events: tuple[str, ...], hook_command: list[str], mark: str) -> str:
    """Put the batonpass hook (``hook_command``, recognised by ``mark``) under each of ``events`` in
    ``settings``; what was done, in a sentence. Idempotent."""
    data = load_settings(settings)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError(f"{settings}: hooks is not an object; nothing was changed")
    if any(not isinstance(hooks.get(e, []), list) for e in events):
        raise ValueError(f"{settings}: hooks.{'/'.join(events)} is not a list; nothing was changed")
    command = shlex.join(hook_command)
    done = {event: _put(hooks.setdefault(event, []), command, mark) for event in events}
    if all(what == "kept" for what in done.values()):
        return f"{settings}: the batonpass {_names(events)} hooks are already installed"
    write_json(settings, data)
    return f"{settings}: " + ", ".join(f"{what} the {event} hook" for event, what in done.items()) + \
        f" running {command}"
