"""What batonpass sees of each tile — pane, agent, its PID, session, transcript, state (in the one vocabulary
of :mod:`pipeline.views.states`), what a waiting agent asks, and a preview of the last answer: the rows of
``baton status`` and of the live board (:mod:`pipeline.views.live_board`)."""

from __future__ import annotations

from typing import Any

from pipeline.engine.config import Config
from pipeline.engine.join_journal import read_joining
from pipeline.engine.journal import default_journal_path
from pipeline.engine.last_answer import NoAnswer, last_response
from pipeline.engine.tiles import TileRuntime, build_tiles
from pipeline.plugin.manager import Registries
from pipeline.plugin.screen import ScreenDialogs
from pipeline.plugin.turns import ResolveStep
from pipeline.system.tmux import Tmux, TmuxError
from pipeline.views.states import state_text, state_words

__all__ = ["FILE_STEPS", "tile_row", "tile_status"]

#: the keys under which a resolve step's value names the agent's session (Claude Code, OpenCode, Codex; a
#: session-file adapter's turn step: Gemini CLI, Qwen Code, pi, Cline, Copilot CLI)
SESSION_KEYS = ("sessionId", "session_id", "thread", "session")
#: resolve steps whose value is worth a column of its own
FILE_STEPS = {
    "session": ("session", "session file", "session-file", "thread"),
    "transcript": ("transcript", "rollout", "store"),
}


async def tile_status(
    config: Config, registries: Registries, tmux: Tmux, preview_chars: int = 80
) -> list[dict[str, Any]]:
    tiles = await build_tiles(config, registries.agents, tmux)
    joining = read_joining(default_journal_path())
    return [{**await tile_row(name, runtime, preview_chars), "joining": joining.get(name, [])}
            for name, runtime in tiles.items()]


async def tile_row(name: str, runtime: TileRuntime, preview_chars: int = 80) -> dict[str, Any]:
    """One tile's row. ``baton status --watch`` keeps its tiles between calls, so adapters that read
    their agent's files as they grow only read what was appended."""
    row: dict[str, Any] = {"tile": name, "pane": runtime.ctx.tile.pane, "agent": runtime.adapter.name,
                           "pane_id": None, "agent_pid": None, "session_id": None, "session": None,
                           "transcript": None,
                           "state": None, "waiting_for": None, "last_response": None}
    try:
        info = await runtime.ctx.pane()
        found = await runtime.adapter.agent_process() if runtime.adapter.process_names else None
        row.update(pane_id=info.pane_id, agent_pid=found.pid if found else None,
                   state=await runtime.adapter.target_state())
        if info.dead:
            status = f" with status {info.dead_status}" if info.dead_status is not None else ""
            row["error"] = f"the command in pane {info.pane_id} exited{status}; baton up starts it again"
        _take_steps(row, await runtime.adapter.resolve())
        row["state"] = state_text(row["state"], info.current_command)
        if state_words(row["state"])[0] == "waiting" and isinstance(runtime.adapter, ScreenDialogs):
            row["waiting_for"] = await runtime.adapter.asked_now()
    except TmuxError as exc:
        row.update(state="gone", error=str(exc))
        return row
    try:
        text = (await last_response(runtime)).text.strip().replace("\n", " ⏎ ")
        row["last_response"] = text if len(text) <= preview_chars else text[: preview_chars - 1] + "…"
    except NoAnswer:
        pass
    return row


def _take_steps(row: dict[str, Any], steps: list[ResolveStep]) -> None:
    """What the adapter's resolve steps tell the row: the session, its files, and what the agent does
    (the ``activity`` step, in its adapter's words)."""
    for step in steps:
        if step.step == "activity" and step.ok:
            row["state"] = step.detail
        row["session_id"] = row["session_id"] or _session_id(step.value)
        for column, names in FILE_STEPS.items():
            if step.step in names and step.ok and row[column] is None:
                value = step.value
                if isinstance(value, dict) and "path" in value:  # the session file's step: path and more
                    value = value["path"]
                row[column] = str(value) if value is not None else step.detail


def _session_id(value: object) -> str | None:
    """The session a resolve step's value names (``{"sessionId": …}``, ``{"thread": …}``), if any."""
    if isinstance(value, dict):
        for key in SESSION_KEYS:
            if isinstance(value.get(key), str) and value[key]:
                return str(value[key])
    return None
