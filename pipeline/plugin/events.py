"""The records that flow between the four stages.

All are frozen: a stage never edits what it received, it makes the next record. Each one names the tile
and the turn it belongs to, so that a log line about any of them can say which hand-off it is part of.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Completion", "Delivery", "Outcome", "Prompt", "Response", "ResponseSource", "handoff_key"]

Outcome = Literal["completed", "failed"]
ResponseSource = Literal["transcript", "hook", "terminal", "store", "input", "join"]


@dataclass(frozen=True, slots=True)
class Completion:
    """Tile `tile` finished turn `turn_id`. `turn_id` is stable: the same turn seen through two signals
    (a file and a hook, say) has the same id, which is how the detector tells them apart."""

    tile: str
    turn_id: str
    outcome: Outcome = "completed"
    signal: str = "terminal"
    at: float = field(default_factory=time.time)
    hop: int = 0
    #: the answer when the signal itself carried it (a Stop hook's last_assistant_message)
    text: str | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Response:
    """The clean text of a turn's final answer, and where it came from."""

    completion: Completion
    text: str
    source: ResponseSource
    cwd: str | None = None
    note: str = ""
    #: a join's group (source ``join``): each source's answer by tile, in the order of ``from:``; ``text``
    #: is all of them under ``## <tile>`` headings
    answers: Mapping[str, str] = field(default_factory=dict)

    @property
    def tile(self) -> str:
        return self.completion.tile


def handoff_key(route: str, turn_id: str, branch: str = "") -> str:
    """The journal key of one route firing for one turn: ``route@turn``; one branch of a fan-out (a route
    with several targets) adds its target: ``route/target@turn``."""
    return f"{route}/{branch}@{turn_id}" if branch else f"{route}@{turn_id}"


@dataclass(frozen=True, slots=True)
class Prompt:
    """What one route will type into its target for one turn."""

    route: str
    source: str
    target: str
    text: str
    turn_id: str
    hop: int
    created: float = field(default_factory=time.time)
    #: how the transform made the text when that is worth knowing (e.g. why an AI transform fell back)
    note: str = ""
    #: the target, when the route fans out to several (each target's hand-off is its own)
    branch: str = ""

    @property
    def key(self) -> str:
        """Identifies this hand-off: one route firing for one turn (and one target of a fan-out)."""
        return handoff_key(self.route, self.turn_id, self.branch)


DeliveryState = Literal["delivered", "unconfirmed", "failed", "skipped", "dry-run"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """The end of a hand-off: what happened to a prompt."""

    prompt: Prompt
    state: DeliveryState
    pane: str | None = None
    attempts: int = 1
    error: str = ""
    note: str = ""
    at: float = field(default_factory=time.time)
