"""What an action is and what it says back (:mod:`pipeline.engine.actions` does them; the bus carries them
between hosts, :mod:`pipeline.bus.actions`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["KINDS", "Action", "ActionKind", "ActionResult"]

ActionKind = Literal["approve", "deny", "send", "retry", "hold", "resume", "pass", "drop"]
KINDS: tuple[str, ...] = get_args(ActionKind)


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    #: the tile (approve, deny, send), the route (hold, resume), the hand-off's key (retry, pass, drop)
    target: str
    #: send: the prompt; pass: the edited prompt typed instead of the hand-off's own (None: as it is)
    text: str | None = None
    #: where it came from, journaled: ``cli``, ``web 127.0.0.1``, ``bus <host>``
    origin: str = "cli"


@dataclass(frozen=True)
class ActionResult:
    ok: bool
    #: one line for the person
    message: str
