"""``baton hooks install --agent pi``: pi's completion hook is an extension, ``baton_hook.ts`` shipped with
this adapter, copied into pi's global extensions folder ``$PI_CODING_AGENT_DIR/extensions/`` (default
``~/.pi/agent/extensions/``) with the hook command written into it. pi loads every ``*.ts`` there at start
(a pi already running loads it on ``/reload`` or its next start). Its records name the event
(``agent_end``; ``agent_settled`` on pi 1.x), the session's id and file (docs/agents.md, pi).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["EXTENSION", "agent_dir", "hook_kind", "install_extension"]

EXTENSION = "batonpass.ts"
SOURCE = Path(__file__).with_name("baton_hook.ts")
_PLACEHOLDER = "const BATON_COMMAND: string[] = [];"
EVENTS = ("agent_end", "agent_settled")


def agent_dir() -> Path:
    """pi's agent folder for this environment: ``$PI_CODING_AGENT_DIR``, else ``~/.pi/agent``."""
    value = os.environ.get("PI_CODING_AGENT_DIR")
    return Path(os.path.expanduser(value)) if value else Path.home() / ".pi" / "agent"


def hook_kind(payload: dict[str, object]) -> str | None:
    """The event of a record the extension spooled, or None when it is not one of ours."""
    event = payload.get("hook_event_name")
    return event if isinstance(event, str) and event in EVENTS and "session_file" in payload else None


def extension_source(hook_command: list[str]) -> str:
    source = SOURCE.read_text(encoding="utf-8")
    return source.replace(_PLACEHOLDER, f"const BATON_COMMAND: string[] = {json.dumps(hook_command)};")


def install_extension(folder: Path, hook_command: list[str]) -> str:
    """Write ``folder/batonpass.ts`` running ``hook_command``. Idempotent; touches no other extension."""
    path = folder / EXTENSION
    wanted = extension_source(hook_command)
    if path.exists() and path.read_text(encoding="utf-8") == wanted:
        return f"{path}: the batonpass extension is already installed"
    what = "updated" if path.exists() else "added"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(wanted, encoding="utf-8")
    os.replace(tmp, path)
    return (f"{path}: {what} the batonpass extension (agent_end, agent_settled) running "
            f"{' '.join(hook_command)} (a pi already running loads it on /reload)")
