"""What ``baton status --watch`` shows, as lines: one row per tile (two lines), never wider than the
terminal.

The data comes from :func:`pipeline.views.tile_status.tile_row` (state, last answer), the journal (queued
and last hand-offs) and the adapters' :meth:`~pipeline.plugin.agents.AgentAdapter.usage`. The board keeps
when each tile's state began (a working turn's start from the agent's own records where it has them,
:meth:`~pipeline.plugin.agents.AgentAdapter.working_since`), so a clock (``working 2m10s``) can tick between
refreshes without asking anything again.

:func:`render` lays each frame out with rich (:class:`~rich.text.Text` cells, colour per state kind),
each cell cut and padded by :func:`columns` (rich's cell widths, or more where rich counts a cluster
narrower than tmux draws it) and prints it to a string, one line per board line; the board's own
loop (:mod:`pipeline.views.live_board`) writes only the lines that changed — rich's ``Live`` would redraw
from a thread of its own, on a timer. Everything from an agent (answers, pane commands, names from the bus)
is stripped of control characters before it reaches rich, and only ever becomes ``Text``, never markup.
"""

from __future__ import annotations

import io
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.cells import cell_len
from rich.console import Console, Group
from rich.text import Text

from pipeline.plugin.usage import SessionUsage
from pipeline.system.text import fit, text_width
from pipeline.views.states import clean, state_words

__all__ = ["Board", "HandoffView", "TileView", "clean", "columns", "handoffs_of", "read_handoffs",
           "read_recent", "render", "state_words"]

#: a hand-off waiting to be typed: ``held`` too (its route held by a person, or its hour used up), and
#: ``awaiting`` (a person's gate)
QUEUED_STATES = ("pending", "transformed", "awaiting", "held", "delivering")


# ---- text that fits ----------------------------------------------------------------------------------


def ago(seconds: float) -> str:
    """``5s``, ``2m10s``, ``3h05m``, ``4d``."""
    s = max(int(seconds), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d"


def tokens(n: int) -> str:
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k" if n < 10_000 else f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M" if n < 100_000_000 else f"{n // 1_000_000}M"


def dollars(cost: float | None) -> str:
    if cost is None:
        return ""
    return f"${cost:.2f}" if cost < 100 else f"${cost:.0f}"


# ---- the journal -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HandoffView:
    route: str
    source: str
    target: str
    state: str
    updated: float
    why: str
    #: the journal's key (``baton retry KEY``)
    key: str = ""


def read_handoffs(path: Path, tiles: list[str]) -> tuple[dict[str, int], dict[str, HandoffView]]:
    """(queued hand-offs per target tile, the latest hand-off from or to each tile), read-only: the board
    never writes the journal (nor makes one where there is none)."""
    if not path.exists():
        return {}, {}
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)
    try:
        marks = ",".join("?" * len(QUEUED_STATES))
        queued = {str(t): int(n) for t, n in db.execute(
            f"SELECT target, COUNT(*) FROM handoffs WHERE state IN ({marks}) GROUP BY target", QUEUED_STATES)}
        last = {}
        for tile in tiles:
            row = db.execute(
                f"SELECT {_VIEW_COLUMNS} FROM handoffs "
                "WHERE source=? OR target=? ORDER BY updated DESC LIMIT 1", (tile, tile)).fetchone()
            if row is not None:
                last[tile] = _view(row)
        return queued, last
    except sqlite3.Error:
        return {}, {}  # no handoffs table yet, or locked past the timeout: the next refresh tries again
    finally:
        db.close()


_VIEW_COLUMNS = "route, source, target, state, updated, last_error, note, key"


def _view(row: tuple[Any, ...]) -> HandoffView:
    route, source, target, state, updated, error, note, key = row
    return HandoffView(route, source, target, state, float(updated), error or note or "", key)


def read_recent(path: Path, limit: int) -> tuple[list[HandoffView], set[str]]:
    """The ``limit`` hand-offs updated last, newest first, and the routes on hold (``baton hold``),
    read-only (as :func:`read_handoffs`)."""
    if not path.exists():
        return [], set()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)
    try:
        recent = [_view(row) for row in db.execute(
            f"SELECT {_VIEW_COLUMNS} FROM handoffs ORDER BY updated DESC LIMIT ?", (limit,))]
        try:
            held = {str(route) for (route,) in db.execute("SELECT route FROM holds")}
        except sqlite3.OperationalError:  # a journal from before holds
            held = set()
        return recent, held
    except sqlite3.Error:
        return [], set()
    finally:
        db.close()


def handoffs_of(rows: list[dict[str, Any]],
                tiles: list[str]) -> tuple[dict[str, int], dict[str, HandoffView]]:
    """:func:`read_handoffs` from journal rows read elsewhere (every host's, from the bus). A hand-off
    that crossed hosts is in both hosts' rows (``published`` on one, ``delivered`` on the other): the row
    updated last tells its state."""
    latest: dict[str, dict[str, Any]] = {}
    for row in rows:
        key = str(row.get("key") or id(row))
        if key not in latest or float(row.get("updated") or 0) >= float(latest[key].get("updated") or 0):
            latest[key] = row
    queued: dict[str, int] = {}
    last: dict[str, HandoffView] = {}
    for row in latest.values():
        source, target = str(row.get("source") or ""), str(row.get("target") or "")
        if row.get("state") in QUEUED_STATES:
            queued[target] = queued.get(target, 0) + 1
        view = HandoffView(str(row.get("route") or ""), source, target, str(row.get("state") or ""),
                           float(row.get("updated") or 0),
                           str(row.get("last_error") or row.get("note") or ""), str(row.get("key") or ""))
        for tile in {source, target} & set(tiles):
            if tile not in last or view.updated > last[tile].updated:
                last[tile] = view
    return queued, last


# ---- the board -----------------------------------------------------------------------------------------


@dataclass
class TileView:
    tile: str
    agent: str
    kind: str = "gone"
    words: str = ""
    #: when this kind of state began (epoch seconds): a working turn's start as its agent recorded it, else
    #: when the board first saw the state
    since: float = field(default_factory=time.time)
    answer: str = ""
    #: what a waiting tile's agent asks, as it draws it: its question and the command, one or two lines
    #: (each cleaned of control characters); "" when it waits for nothing or its dialog cannot be read
    waiting_for: str = ""
    queued: int = 0
    #: the join groups that will hand on to this tile, still joining: ``["verdicts: 1 of 2 (security)"]``
    joining: list[str] = field(default_factory=list)
    last: HandoffView | None = None
    usage: SessionUsage | None = None


class Board:
    """Every tile's view, updated from status rows; the order is routes.yaml's."""

    def __init__(self, tiles: list[tuple[str, str]], title: str = "") -> None:
        self.title = title
        self.views = {name: TileView(name, agent) for name, agent in tiles}
        self.note = ""

    def update(self, row: dict[str, Any], pane_command: str = "", now: float | None = None,
               started: float | None = None) -> None:
        """Take a status row. ``started``: when the running turn began by the agent's own records
        (:meth:`~pipeline.plugin.agents.AgentAdapter.working_since`); the clock of a working tile counts
        from it, else from when the board first saw the tile working."""
        view = self.views[row["tile"]]
        kind, words = state_words(row.get("state"), pane_command)
        now = time.time() if now is None else now
        if kind == "working" and started is not None and started <= now:
            view.since = started
        elif kind != view.kind:
            view.since = now
        view.kind, view.words, view.agent = kind, words, row.get("agent") or view.agent
        answer = row.get("last_response") or ""
        if kind == "gone" and row.get("error"):
            answer = f"({row['error']})"  # no pane, or no tmux server: what the person can do something about
        view.answer = clean(answer.split(" ⏎ ", 1)[0]).strip()
        asked = row.get("waiting_for") if kind == "waiting" else None
        view.waiting_for = "\n".join(clean(ln).strip() for ln in str(asked or "").split("\n") if ln.strip())

    def keep(self, tiles: list[tuple[str, str]]) -> None:
        """Show exactly ``tiles`` (name, agent), in that order; a tile shown before keeps its view (its
        clock) — the all-hosts board, whose tiles come and go with their hosts."""
        self.views = {name: self.views.get(name) or TileView(name, agent) for name, agent in tiles}

    def update_handoffs(self, queued: dict[str, int], last: dict[str, HandoffView],
                        joining: dict[str, list[str]] | None = None) -> None:
        for name, view in self.views.items():
            view.queued, view.last = queued.get(name, 0), last.get(name)
            view.joining = (joining or {}).get(name, [])


def _state_text(view: TileView, now: float) -> str:
    if view.kind == "working":
        return f"working {ago(now - view.since)}" + (f": {view.words}" if view.words else "")
    if view.kind in ("waiting", "absent"):
        return f"{view.kind}: {view.words}"
    return view.kind + (f": {view.words}" if view.words else "")


def _handoff_text(view: TileView, now: float) -> str:
    h = view.last
    if h is None:
        return ""
    where = f"→{h.target}" if h.source == view.tile else f"←{h.source}"
    state = "queued" if h.state in ("pending", "transformed") else h.state
    return f"{where} {state} {ago(now - h.updated)} ago"


#: the columns STATE keeps before QUEUED, TOKENS and COST give way: ``waiting: permission prompt``
STATE_ROOM = 26
#: rich's style per state kind (none when not ``colour``: NO_COLOR)
STYLES = {"working": "yellow", "waiting": "bold red", "idle": "green", "absent": "dim", "gone": "dim"}


def columns(text: str) -> int:
    """Columns ``text`` may take in a terminal: rich's count, or one per character (two for a wide one)
    where that is more. rich counts some clusters narrower than tmux draws them (👍🏽: 2, tmux 4; क्षि: 2,
    tmux 3), and a cell counted short would push the line past the terminal's edge; counted long it only
    leaves a column unused (👨‍👩‍👧: 6 here, 2 drawn)."""
    return max(cell_len(text), text_width(text))


def _cell(text: str, width: int, *, right: bool = False, style: str = "") -> Text:
    """``text`` as exactly ``width`` columns, cut with ``…`` and padded by :func:`columns`. Everything the
    board shows passes here, so no control character reaches rich, and agent text is only ever a
    :class:`~rich.text.Text`, never markup: an answer saying ``[bold]`` shows ``[bold]``."""
    width = max(width, 1)
    shown = fit(clean(text), width, measure=columns)
    pad = " " * (width - columns(shown))
    return Text(pad + shown if right else shown + pad, style=style, overflow="ellipsis", no_wrap=True)


def _line(*cells: Text) -> Text:
    """One line of the board: ``cells`` two spaces apart (rich cuts it at the width, with ``…``)."""
    return Text("  ", overflow="ellipsis", no_wrap=True).join(cells)


def _printed(lines: list[Text], width: int, colour: bool) -> list[str]:
    """``lines`` as rich prints them in ``width`` columns: SGR colours only when ``colour`` (whatever the
    environment says: the caller has read NO_COLOR), no trailing spaces."""
    out = io.StringIO()
    console = Console(width=width, file=out, force_terminal=colour, no_color=False, legacy_windows=False,
                      color_system="standard" if colour else None)
    console.print(Group(*lines), no_wrap=True, overflow="ellipsis", crop=True)
    return [line.rstrip(" ") for line in out.getvalue().split("\n")[: len(lines)]]


def render(board: Board, width: int, height: int, now: float | None = None,
           colour: bool = False) -> list[str]:
    """The board as lines of at most ``width`` columns (escape sequences, when ``colour``, take none) and
    at most ``height`` lines. Per tile: name, agent, state, queued hand-offs, tokens, cost (in a terminal too
    narrow for all of them, COST, then TOKENS, then QUEUED give way to the state); under it the last
    answer's first line (for a tile that waits: what its agent asks; for a tile that is gone: why) and the
    last hand-off from or to the tile."""
    now = time.time() if now is None else now
    width = max(width, 20)
    views = list(board.views.values())
    name_w = min(max([4, *(columns(v.tile) for v in views)]), 14)
    agent_w = min(max([5, *(columns(v.agent) for v in views)]), 9)
    # the columns right of STATE, dropped from the right while STATE would be too narrow for its words
    extra = [("QUEUED", 6), ("TOKENS", 6), ("COST", 7)]
    while extra and width - (name_w + agent_w + sum(w + 2 for _, w in extra) + 4) < STATE_ROOM:
        extra.pop()
    state_w = max(width - (name_w + agent_w + sum(w + 2 for _, w in extra) + 4), 8)
    clock = time.strftime("%H:%M:%S", time.localtime(now))
    title = f"batonpass · {len(views)} tile{'s' if len(views) != 1 else ''}" + (
        f" · {board.title}" if board.title else "")
    lines = [_line(_cell(title, width - 19), _cell(f"{clock}  q quits", 17)),
             _line(_cell("TILE", name_w), _cell("AGENT", agent_w), _cell("STATE", state_w),
                   *(_cell(name, w, right=True) for name, w in extra))]
    room = max(height - 2 - (1 if board.note else 0), 2)
    shown = views if len(views) * 2 <= room else views[: max((room - 1) // 2, 0)]
    for view in shown:
        u = view.usage
        values = {"QUEUED": str(view.queued) if view.queued else "-",
                  "TOKENS": tokens(u.total) if u else "-", "COST": dollars(u.cost_usd) if u else ""}
        lines.append(_line(_cell(view.tile, name_w), _cell(view.agent, agent_w),
                           _cell(_state_text(view, now), state_w, style=STYLES.get(view.kind, "")),
                           *(_cell(values[name], w, right=True) for name, w in extra)))
        handoff = _handoff_text(view, now)
        handoff_w = min(columns(handoff), 36, max(width // 2 - 4, 12))
        asks = view.waiting_for.replace("\n", " · ")
        under = f"asks: {asks}" if asks else view.answer or "(no answer yet)"
        answer = _cell(f"  └ {under}", width - handoff_w - 2)
        lines.append(_line(answer, _cell(handoff, handoff_w)) if handoff else _line(answer))
    if len(shown) < len(views):
        lines.append(_line(_cell(f"… {len(views) - len(shown)} more tiles: make the terminal taller", width)))
    if board.note:
        lines.append(_line(_cell(board.note, width)))
    return _printed(lines[:height] if height > 0 else lines, width, colour)
