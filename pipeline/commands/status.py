"""``baton status``: per tile, what batonpass sees — pane, agent, its PID, session, transcript, state,
and a preview of the last answer."""

from __future__ import annotations

from typing import Any

from pipeline.commands.preview import PreviewError, last_response
from pipeline.engine.config import Config
from pipeline.engine.tiles import build_tiles
from pipeline.plugin.manager import Registries
from pipeline.system.tmux import Tmux, TmuxError

__all__ = ["tile_status"]

#: resolve steps whose value is worth a column of its own
FILE_STEPS = {
    "session": ("session", "session file", "thread"),
    "transcript": ("transcript", "rollout", "store"),
}


async def tile_status(
    config: Config, registries: Registries, tmux: Tmux, preview_chars: int = 80
) -> list[dict[str, Any]]:
    rows = []
    for name, runtime in (await build_tiles(config, registries.agents, tmux)).items():
        row: dict[str, Any] = {"tile": name, "pane": runtime.ctx.tile.pane, "agent": runtime.adapter.name,
                               "pane_id": None, "agent_pid": None, "session": None, "transcript": None,
                               "state": None, "last_response": None}
        try:
            info = await runtime.ctx.pane()
            found = await runtime.adapter.agent_process() if runtime.adapter.process_names else None
            row.update(pane_id=info.pane_id, agent_pid=found.pid if found else None,
                       state=await runtime.adapter.target_state())
            for step in await runtime.adapter.resolve():
                if step.step == "activity" and step.ok:  # what the agent does, in its adapter's words
                    row["state"] = step.detail
                for column, names in FILE_STEPS.items():
                    if step.step in names and step.ok and row[column] is None:
                        row[column] = str(step.value) if step.value is not None else step.detail
        except TmuxError as exc:
            row.update(state="gone", error=str(exc))
            rows.append(row)
            continue
        try:
            text = (await last_response(runtime)).text.strip().replace("\n", " ⏎ ")
            row["last_response"] = text if len(text) <= preview_chars else text[: preview_chars - 1] + "…"
        except PreviewError:
            pass
        rows.append(row)
    return rows
