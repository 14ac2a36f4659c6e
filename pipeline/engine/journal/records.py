"""What the journal holds, as the rest of batonpass reads it: a hand-off's states and record, a person's
action, and which hand-offs ``baton history`` asks for."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

from pipeline.plugin.events import Prompt, handoff_key

HandoffState = Literal[
    "pending", "transformed", "awaiting", "held", "delivering", "delivered", "unconfirmed", "failed",
    "skipped", "published", "dropped", "expired",
]
#: every state, in the order a hand-off passes them (``baton history --outcome`` takes these)
STATES: tuple[HandoffState, ...] = get_args(HandoffState)
FINAL_STATES = ("delivered", "unconfirmed", "failed", "skipped", "published", "dropped", "expired")


@dataclass(frozen=True)
class HandoffRecord:
    key: str
    route: str
    source: str
    target: str
    turn_id: str
    hop: int
    state: HandoffState
    response: str | None
    prompt: str | None
    attempts: int
    last_error: str
    note: str
    pane: str | None
    created: float
    updated: float
    #: the AI transform's model call: model, tokens, cost_usd (None: no model was called)
    usage: dict[str, Any] | None = None

    def to_prompt(self) -> Prompt:
        branch = self.target if self.key == handoff_key(self.route, self.turn_id, self.target) else ""
        return Prompt(route=self.route, source=self.source, target=self.target, text=self.prompt or "",
                      turn_id=self.turn_id, hop=self.hop, created=self.created, branch=branch)


@dataclass(frozen=True)
class ActionRecord:
    """A person's action (``baton approve``, ``deny``, ``send``, ``retry``, ``hold``, ``resume``; the web
    page's buttons): what, on what, from where, and how it ended."""

    id: str
    #: approve, deny, send, retry, hold, resume
    kind: str
    #: the tile, route or hand-off key it was about
    target: str
    #: where it came from: ``cli``, ``web 127.0.0.1``, ``bus <host>``
    origin: str
    #: the host it was performed on
    host: str
    #: ``started`` (it stopped before it knew), ``done``, ``refused``
    outcome: str
    message: str
    created: float
    updated: float


@dataclass(frozen=True)
class HistoryFilter:
    """Which hand-offs and actions ``baton history`` shows: every field set must hold (None: any). Of an
    action, ``route`` is its kind (``approve``…), ``tile`` its target, ``outcome`` how it ended."""

    route: str | None = None
    #: the source or the target
    tile: str | None = None
    outcome: str | None = None
    #: created at or after (epoch seconds)
    since: float | None = None
    #: actions refused before they changed anything too (a typo's ``baton hold nosuch``): not history
    #: unless asked for, here or with ``outcome="refused"``
    refused: bool = False

    def sql(
        self, extra: tuple[str, ...] = (), extra_args: tuple[object, ...] = ()
    ) -> tuple[str, tuple[object, ...]]:
        """`` WHERE ...`` (or "") and its arguments."""
        terms, args = list(extra), list(extra_args)
        if self.route is not None:  # a route's name, or FROM->TO (the route's tiles, named or not)
            terms.append("(route = ? OR source || '->' || target = ?)")
            args += [self.route, self.route]
        if self.tile is not None:
            terms.append("(source = ? OR target = ?)")
            args += [self.tile, self.tile]
        if self.outcome is not None:
            terms.append("state = ?")
            args.append(self.outcome)
        if self.since is not None:
            terms.append("created >= ?")
            args.append(self.since)
        return (" WHERE " + " AND ".join(terms) if terms else ""), tuple(args)

    def action_sql(self, extra: tuple[str, ...] = (), extra_args: tuple[object, ...] = ()
                   ) -> tuple[str, tuple[object, ...]]:
        """`` WHERE ...`` (or "") over the actions table, and its arguments."""
        terms, args = list(extra), list(extra_args)
        for column, value in (("kind", self.route), ("target", self.tile), ("outcome", self.outcome)):
            if value is not None:
                terms.append(f"{column} = ?")
                args.append(value)
        if self.since is not None:
            terms.append("created >= ?")
            args.append(self.since)
        if not self.refused and self.outcome is None:
            terms.append("outcome != 'refused'")
        return (" WHERE " + " AND ".join(terms) if terms else ""), tuple(args)

    def matches(self, row: dict[str, object]) -> bool:
        """The same test on a row read from elsewhere (``--all-hosts``: the bus)."""
        created, between = row.get("created"), f"{row.get('source')}->{row.get('target')}"
        return ((self.route is None or self.route in (row.get("route"), between))
                and (self.tile is None or self.tile in (row.get("source"), row.get("target")))
                and (self.outcome is None or row.get("state") == self.outcome)
                and (self.since is None or (isinstance(created, int | float) and created >= self.since)))


COLUMNS = (
    "key, route, source, target, turn_id, hop, state, response, prompt, attempts, last_error, note, pane,"
    " created, updated, usage"
)
ACTION_COLUMNS = "id, kind, target, origin, host, outcome, message, created, updated"


def handoff_record(row: tuple[Any, ...]) -> HandoffRecord:
    """A hand-off's record from its row (``SELECT {COLUMNS}``)."""
    try:
        usage = json.loads(row[-1]) if row[-1] else None
    except (TypeError, ValueError):  # not written by batonpass: no use known, and no traceback
        usage = None
    return replace(HandoffRecord(*row[:-1]), usage=usage if isinstance(usage, dict) else None)
