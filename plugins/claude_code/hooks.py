"""``baton hooks install --claude``: Claude Code's Stop hook, pointing at batonpass's hook spool.

The hook runs ``python -m pipeline.spool claude``, which writes the hook's stdin (``session_id``,
``prompt_id``, ``last_assistant_message``) and ``$TMUX_PANE`` into the spool and exits 0 at once —
whether or not a daemon runs — so it can never fail or slow the agent's turn.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.plugin.hook_settings import load_settings
from pipeline.plugin.tools import write_json

__all__ = ["HOOK_MARK", "install_stop_hook"]

#: how a batonpass hook command ends, whatever Python runs it
HOOK_MARK = "-m pipeline.spool claude"


def install_stop_hook(settings: Path, command: str) -> str:
    """Add ``command`` to ``hooks.Stop`` of Claude Code's ``settings.json``, keeping everything else.

    Idempotent: a batonpass hook already there is left alone (or its command updated if the Python
    path changed). A settings file that is not valid JSON is not touched: the error says so.
    """
    data = load_settings(settings)
    hooks = data.setdefault("hooks", {})
    stop = hooks.setdefault("Stop", []) if isinstance(hooks, dict) else None
    if not isinstance(stop, list):
        raise ValueError(f"{settings}: hooks.Stop is not a list; nothing was changed")
    for entry in stop:
        for hook in entry.get("hooks", []) if isinstance(entry, dict) else []:
            if isinstance(hook, dict) and str(hook.get("command", "")).endswith(HOOK_MARK):
                if hook["command"] == command:
                    return f"{settings}: the batonpass Stop hook is already installed"
                hook["command"] = command
                write_json(settings, data)
                return f"{settings}: updated the batonpass Stop hook to run {command}"
    stop.append({"hooks": [{"type": "command", "command": command, "timeout": 10}]})
    write_json(settings, data)
    return f"{settings}: added a Stop hook running {command}"

