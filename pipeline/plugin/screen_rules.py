"""An agent's screen read by its own module of functions, and the adapter methods that only hand the screen
to them, written once.

An adapter that reads its agent's screen with plain functions (busy or not, what a dialog asks, the keys
that answer it, the input box, the agent's paste placeholder) names them in a :class:`ScreenRules` and puts
:class:`ReadsScreenRules` first among its bases; the screen methods of
:class:`~pipeline.plugin.screen.ScreenAdapter` and :class:`~pipeline.plugin.agents.AgentAdapter` then call
those functions (docs/adapters.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pipeline.plugin.pastes import box_holds, shows_text
from pipeline.system.tmux import TmuxError

if TYPE_CHECKING:
    from pipeline.plugin.agents import InputHolds, TileContext

__all__ = ["ReadsScreenRules", "ScreenRules"]


@dataclass(frozen=True)
class ScreenRules:
    """The functions that read one agent's screen (each takes the screen's text)."""

    is_busy: Callable[[str], bool]
    #: what the screen says the agent waits for (a dialog), None when it waits for nothing
    waiting_for: Callable[[str], str | None]
    #: the keys that answer its permission prompt (``approve`` or not), None when none shows
    answer_keys: Callable[[str, bool], list[str] | None]
    #: what its input box holds, None when no input box shows
    input_draft: Callable[[str], str | None]
    #: whether a draft is its placeholder for a paste of this text
    paste_placeholder: Callable[[str, str], bool]


class ReadsScreenRules:
    """The screen methods of an adapter whose agent's screen is read by :attr:`rules` (first in the bases)."""

    rules: ClassVar[ScreenRules]
    ctx: TileContext

    def is_busy(self, screen: str) -> bool:
        return self.rules.is_busy(screen)

    def waiting_for(self, screen: str) -> str | None:
        return self.rules.waiting_for(screen)

    def answer_keys(self, screen: str, approve: bool) -> list[str] | None:
        return self.rules.answer_keys(screen, approve)

    def draft(self, screen: str) -> str:
        return self.rules.input_draft(screen) or ""

    def shows_paste(self, draft: str, text: str) -> bool:
        return self.rules.paste_placeholder(draft, text) or shows_text(draft, text)

    async def input_holds(self, text: str) -> InputHolds | None:
        """What the input box holds; None when none shows (the agent starting, or a dialog over it)."""
        try:
            return box_holds(self.rules.input_draft(await self.ctx.capture()), text, self.shows_paste)
        except TmuxError:
            return None
