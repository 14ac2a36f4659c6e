"""``baton status --watch --all-hosts``: the live board of every host's tiles, read from the bus.

Each host's ``baton run`` puts its tiles' states and its latest hand-offs into the bus's key-value bucket
every :data:`~pipeline.bus.board.BOARD_EVERY_S` (:mod:`pipeline.bus.board`); this board reads the bucket
every :data:`LOOK_S` — the values it shows are themselves that fresh, so looking more often would show
nothing new — and redraws when something changed (and each second, for the clocks). A host whose keys
stopped changing for :data:`SILENT_S` (its ``baton run`` stopped, or it lost the bus) shows its tiles as
``gone: no word from HOST for 12s``, not as the last state it sent. While the bus does not answer, the
board keeps what it last read and says so on its last line. What the board can know from the bus is what
the hosts publish: state, pane, agent, hand-offs — not the answers or the tokens (those stay on each host:
``baton status --watch`` there).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import anyio

from pipeline.bus.board import BOARD_EVERY_S
from pipeline.bus.link import subject_token
from pipeline.engine.config import Config
from pipeline.engine.hosts import bus_servers
from pipeline.system.terminal import FullScreen
from pipeline.views.all_hosts import REACH_S, unreachable
from pipeline.views.board import Board, handoffs_of
from pipeline.views.live_board import BoardScreen, Wake, quiet_log, refusal

__all__ = ["HostsFeed", "show_hosts_board"]

#: how often the bucket is read
LOOK_S = BOARD_EVERY_S / 2
#: a host whose keys did not change for this long is taken for gone (3 missed puts)
SILENT_S = 3 * BOARD_EVERY_S


class HostsFeed:
    """Every host's tiles, read from the bus; tile names are routes.yaml's (one config for all hosts), so a
    tile's host is shown under it. ``shown`` is called after each look; ``but`` names a host whose tiles
    are left out (``baton web`` shows its own host's from their own files)."""

    def __init__(self, link: Any, title: str, shown: Callable[[], None], but: str | None = None) -> None:
        self.board = Board([], title)
        self.link, self.shown = link, shown
        self.skip = f"tiles.{subject_token(but)}" if but else None
        self.wake = Wake()
        #: each tile's host
        self.host_of: dict[str, str] = {}
        #: per bucket key: its last revision, and when the board saw it change (epoch seconds)
        self.heard: dict[str, tuple[int, float]] = {}
        #: the other hosts' hand-offs awaiting a person (``gate: person``): their prompts stay on their host
        self.awaiting: list[dict[str, Any]] = []

    def _heard(self, key: str, revision: int, now: float) -> float:
        """How long ago ``key`` last changed, as far as this board has seen."""
        before = self.heard.get(key)
        if before is None or before[0] != revision:
            self.heard[key] = (revision, now)
            return 0.0
        return now - before[1]

    def show(self, tiles: dict[str, tuple[int, list[dict[str, Any]]]],
             history: dict[str, tuple[int, list[dict[str, Any]]]], now: float) -> None:
        """Put what the bucket holds on the board."""
        rows: list[tuple[dict[str, Any], float]] = []
        for key, (revision, host_rows) in sorted(tiles.items()):
            if key == self.skip:
                continue
            silent = self._heard(key, revision, now)
            rows += [(row, silent) for row in host_rows if isinstance(row.get("tile"), str)]
        names = [row["tile"] for row, _ in rows]
        # one routes.yaml names each tile once; two hosts that claim one name are told apart
        named = [(name if names.count(name) == 1 else f"{name}@{row.get('host', '?')}", row, silent)
                 for name, (row, silent) in zip(names, rows, strict=True)]
        self.board.keep([(name, str(row.get("agent") or "")) for name, row, _ in named])
        for name, row, silent in named:
            host = self.host_of[name] = str(row.get("host") or "?")
            if silent >= SILENT_S:
                self.board.update({"tile": name, "state": "gone"}, now=now)
                self.board.views[name].words = f"no word from {host} for {int(silent)}s"
            else:
                since = row.get("working_since")
                self.board.update({**row, "tile": name, "last_response": None}, now=now,
                                  started=since if isinstance(since, int | float) else None)
            pane = f", pane {row['pane']}" if row.get("pane") else ""
            self.board.views[name].answer = f"on {host}{pane}"
        journal = [row for _, host_rows in history.values() for row in host_rows]
        self.board.update_handoffs(*handoffs_of(journal, list(self.board.views)))
        mine = self.skip.replace("tiles.", "history.", 1) if self.skip else None
        self.awaiting = [{"key": row.get("key"), "route": row.get("route"), "source": row.get("source"),
                          "target": row.get("target"), "prompt": None, "created": row.get("created"),
                          "expires": None, "host": row.get("host")}
                         for key, (_, host_rows) in sorted(history.items()) if key != mine
                         for row in host_rows if row.get("state") == "awaiting"]

    async def look_loop(self) -> None:
        from pipeline.bus.board import board_entries

        while True:
            try:
                with anyio.fail_after(REACH_S):
                    tiles = await board_entries(self.link, "tiles")
                    history = await board_entries(self.link, "history")
            except Exception as exc:  # an outage: what was read last stays, and the last line says so
                why = str(exc) or type(exc).__name__
                self.board.note = (f"{time.strftime('%H:%M:%S')} the bus did not answer ({why}); "
                                   "showing what it said last")
            else:
                self.board.note = ""
                self.show(tiles, history, time.time())
                if not self.board.views:
                    self.board.note = ("no host has published its tiles yet (is baton run running, with "
                                       "the bus?)")
            self.shown()
            await self.wake.wait(LOOK_S)


class HostsBoard(BoardScreen):
    """The terminal's board of every host's tiles: a :class:`HostsFeed` drawn on a full screen."""

    def __init__(self, link: Any, screen: FullScreen, title: str) -> None:
        self.feed = HostsFeed(link, title, self.draw)
        super().__init__(self.feed.board, screen)

    def look_again(self) -> None:
        self.feed.wake.set()


async def _run(config: Config, stdin: Any, stdout: Any) -> int:
    from pipeline.bus.link import BusLink, BusUnreachable

    link = BusLink(config.settings.bus, reader=True)  # read-only: it hands nothing off, keeps nothing
    try:
        with anyio.fail_after(REACH_S):
            await link.connect()
    except (TimeoutError, BusUnreachable) as exc:
        why = unreachable(str(exc)) if str(exc) else f"did not answer within {REACH_S:g}s"
        print(f"baton status --all-hosts: the bus at {', '.join(bus_servers(config.settings.bus))} {why}",
              file=sys.stderr)
        return 1
    try:
        with FullScreen(stdin, stdout) as screen:
            live = HostsBoard(link, screen, "all hosts")
            with quiet_log(live.board):
                live.draw()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(live.feed.look_loop)
                    live.start(tg)
                    await live.quit.wait()
                    tg.cancel_scope.cancel()
    finally:
        await link.close()
    return 0


def show_hosts_board(args: argparse.Namespace, config: Config) -> int:
    """``baton status --watch --all-hosts``: 0 when quit; 1 without a bus or a terminal; 2 with ``--json``."""
    if not args.json and not bus_servers(config.settings.bus):
        print("baton status --all-hosts: no bus configured (settings.bus.servers in routes.yaml, or "
              "BATON_BUS_URL)", file=sys.stderr)
        return 1
    refused = refusal(args)
    if refused is not None:
        return refused
    return anyio.run(_run, config, sys.stdin, sys.stdout)
