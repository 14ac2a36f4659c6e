"""``baton hooks install --agent cline``: Cline's ``TaskComplete`` and ``TaskError`` hooks, executables of
those names in its hooks folder (``~/.cline/hooks``, or ``hooks`` in ``$CLINE_DIR``), each running
batonpass's hook spool. Cline 3.0.65 runs every executable there named after an event, with the event's
JSON on stdin and the pane's environment (``$TMUX_PANE``), from its next start on; nothing needs enabling.

``TaskComplete`` (``hookName: "agent_end"``) runs once a turn ends with an answer, with ``turn.outputText``
and ``sessionContext.rootSessionId``; ``TaskError`` (``agent_error``) when a turn fails. An interrupt runs
neither (it runs ``SessionShutdown``). The answer is always read from the session's messages.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

__all__ = ["EVENTS", "HOOK_MARK", "cline_config_dir", "hook_kind", "hook_session", "install_hooks"]

HOOK_MARK = "-m pipeline.spool cline"
#: the hook file's name → the ``hookName`` its payload carries
EVENTS = {"TaskComplete": "agent_end", "TaskError": "agent_error"}


def cline_config_dir() -> Path:
    return Path(os.environ.get("CLINE_DIR") or Path.home() / ".cline").expanduser()


def hook_kind(payload: dict[str, Any]) -> str | None:
    """``agent_end`` or ``agent_error`` for a record of one of our hooks, else None."""
    kind = payload.get("hookName")
    return kind if kind in EVENTS.values() else None


def hook_session(payload: dict[str, Any]) -> str | None:
    context = payload.get("sessionContext")
    sid = context.get("rootSessionId") if isinstance(context, dict) else None
    return sid if isinstance(sid, str) and sid else None


def _script(event: str, command: str) -> str:
    return (f"#!/bin/sh\n# batonpass: Cline's {event} hook (baton hooks install --agent cline)\n"
            f"exec {command}\n")


def _read(path: Path) -> str | None:
    """A hook file's text (None when there is none); one that is not batonpass's stops the install."""
    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} cannot be read ({exc}); nothing was changed") from None
    if HOOK_MARK not in old:
        raise ValueError(f"{path} is another hook, not batonpass's; nothing was changed")
    return old


def install_hooks(folder: Path, hook_command: list[str]) -> str:
    """Write the batonpass hooks into ``folder``; what was done, in a sentence. Idempotent; a hook of the
    same name that is not batonpass's is left alone (and said so)."""
    command = shlex.join(hook_command)
    olds = {event: _read(folder / event) for event in EVENTS}
    done: dict[str, str] = {}
    for event, old in olds.items():
        path, new = folder / event, _script(event, command)
        done[event] = "kept" if old == new else "added" if old is None else "updated"
        if old != new:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_text(new, encoding="utf-8")
        path.chmod(0o755)
    if all(what == "kept" for what in done.values()):
        return f"{folder}: the batonpass TaskComplete and TaskError hooks are already installed"
    return f"{folder}: " + ", ".join(f"{what} the {event} hook" for event, what in done.items()) + \
        f" running {command} (a Cline already running reads them at its next start)"
