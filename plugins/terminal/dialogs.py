"""Dialogs that wait for a person (a permission prompt), read from an agent's screen.

Some agents record such a dialog in their files (Claude Code's session file says ``waiting``); others do not
(OpenCode's store, Codex's rollout), and a screen-followed agent has no files at all. For those the screen is
the only witness: an adapter says how to recognise its dialogs (:meth:`ScreenDialogs.waiting_for`), its
follower tells the engine on every look (:meth:`ScreenDialogs.look_for_person`, so the person is notified
once per episode), ``baton status`` shows it (:meth:`ScreenDialogs.waiting_step`), and the adapter's
``target_state`` says ``busy`` while one shows: a hand-off typed there would answer the dialog.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.plugin import TmuxError
from pipeline.plugin.agents import ResolveStep

if TYPE_CHECKING:
    from pipeline.plugin.agents import TileContext

__all__ = ["ScreenDialogs"]


class ScreenDialogs:
    """Mixed into :class:`plugins.terminal.adapter.TerminalAdapter`: the screen's dialogs, for every adapter
    that reads a screen."""

    ctx: TileContext

    def waiting_for(self, screen: str) -> str | None:
        """What ``screen`` shows the agent waits for a person for (``"permission prompt"``), or None.
        Agents that draw such dialogs override this; while one shows, the turn has not ended."""
        return None

    async def look_for_person(self) -> str | None:
        """Read the screen and tell the engine (``ctx.waiting``) whether a dialog waits for a person there;
        returns its reason, or None (also when the pane cannot be read)."""
        try:
            reason = self.waiting_for(await self.ctx.capture())
        except TmuxError:
            reason = None
        self.ctx.waiting(reason)
        return reason

    async def waiting_step(self) -> ResolveStep | None:
        """``baton status``'s ``activity`` step (``waiting (<reason>)``) while the screen shows a dialog."""
        try:
            reason = self.waiting_for(await self.ctx.capture())
        except TmuxError:
            return None
        return ResolveStep("activity", True, f"waiting ({reason})", reason) if reason else None
