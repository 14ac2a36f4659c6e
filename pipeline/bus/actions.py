"""Actions over the bus: placeholder until the transport lands."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.engine.action_kinds import Action, ActionResult
    from pipeline.engine.config import Config

__all__ = ["send_action"]


async def send_action(action: Action, config: Config, host: str, action_id: str, here: str) -> ActionResult:
    from pipeline.engine.action_kinds import ActionResult

    return ActionResult(False, f"tile {action.target} is on host {host}: not over the bus yet")
