"""``baton status --watch``: the live board, redrawn when something changes.

What wakes a refresh: a change to a file an agent writes its state to (the session file, transcript,
rollout or store each tile's adapter resolved; one :class:`~pipeline.engine.watch.FileWatcher` for all),
a change to the journal (``baton run`` queued or handed something off), ``r``, a resize, and — for what
no file tells (a pane closed, an agent exited to its shell, screen-only agents) — a slow look every
:data:`LOOK_EVERY_S`. The slow look asks tmux once for every pane (alive? its pid, command, cursor, when
its window last printed) and reads each pane's process tree and the tiles' files' signatures; only the
tiles where one of those moved are looked at again (and each at least every :data:`LOOK_ALL_S`): an idle
board of 50 tiles costs one ``list-panes`` every 2 s, not 50 looks (docs/performance.md, baton web).
A one-second tick only redraws (the ``working 2m10s`` clocks), asking nothing.
Token counts are read in their own task, only what the agents appended since the last read, so a first
read of a long transcript never holds the board back. ``q`` or Ctrl-C quits; the terminal is put back.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

import anyio
from anyio import CancelScope
from anyio.abc import TaskGroup

from pipeline.cmdline.config import tmux_for
from pipeline.engine.config import Config
from pipeline.engine.context import pane_lookups_shared
from pipeline.engine.join_journal import read_joining
from pipeline.engine.journal import default_journal_path
from pipeline.engine.tiles import TileRuntime, build_tiles
from pipeline.engine.watch import FileWatcher, Subscription
from pipeline.plugin.manager import Registries
from pipeline.system import proc
from pipeline.system.terminal import FullScreen
from pipeline.system.tmux import PaneInfo, Tmux, TmuxError
from pipeline.views.board import Board, read_handoffs, render
from pipeline.views.states import state_words
from pipeline.views.tile_status import tile_row

__all__ = ["BoardScreen", "TileFeed", "Wake", "quiet_log", "refusal", "run_live_board", "show_live_board"]

log = logging.getLogger("batonpass")
#: how often tiles are looked at with no file change (panes closing, agents exiting, screen-only agents);
#: BATON_BOARD_LOOK_S sets it (a test pushes it out to show that file changes alone redraw the board)
LOOK_EVERY_S = 2.0
#: the slow look looks at a tile whose pane, processes, files and screen all stayed still at least this
#: often anyway, for what none of them tells (BATON_BOARD_LOOK_ALL_S sets it)
LOOK_ALL_S = 30.0
#: the clocks' tick: a redraw only
TICK_S = 1.0
#: the least time between two refreshes: a burst of file changes (an agent streaming into its transcript)
#: is one refresh, at most five a second
SETTLE_S = 0.2


class Wake:
    """A flag many tasks can raise and one task waits on; raising it twice before the wait is one wake."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self, timeout: float | None = None) -> bool:
        """True when raised, False when ``timeout`` passed first."""
        with anyio.move_on_after(timeout):
            await self._event.wait()
        raised, self._event = self._event.is_set(), anyio.Event()
        return raised


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _mark(info: PaneInfo, files: set[Path]) -> tuple[object, ...]:
    """What a tile's row rests on that the slow look sees without looking at the tile: its pane as tmux
    lists it (alive, pid, command, cursor), the processes under it (an agent started, exec'd or exited)
    and the signatures of the files its row names."""
    return info, tuple(proc.subtree(info.pid)), tuple(sorted((str(p), _signature(p)) for p in files))


class Follow:
    """The files whose changes wake the board, kept in step with what the tiles resolve to. A hint for a
    file that did not change (opened, read: the board's own reads of the journal) wakes nothing."""

    def __init__(self, watcher: FileWatcher, tg: TaskGroup, changed: Callable[[set[str]], None]) -> None:
        self.watcher, self.tg, self.changed = watcher, tg, changed
        self._subs: dict[Path, tuple[Subscription, CancelScope]] = {}
        self.owners: dict[Path, set[str]] = {}

    def want(self, owners: dict[Path, set[str]]) -> None:
        """Follow each path of ``owners``; a change to it marks its tiles ("" for the journal)."""
        self.owners = owners
        for path in set(self._subs) - set(owners):
            sub, scope = self._subs.pop(path)
            scope.cancel()
            sub.close()
        for path in set(owners) - set(self._subs):
            sub, scope = self.watcher.subscribe(path), anyio.CancelScope()
            self._subs[path] = (sub, scope)
            self.tg.start_soon(self._forward, path, sub, scope)

    async def _forward(self, path: Path, sub: Subscription, scope: CancelScope) -> None:
        with scope:
            seen = _signature(path)
            while True:
                await sub.wait()
                now = _signature(path)
                if now != seen:
                    seen = now
                    self.changed(self.owners.get(path, set()))


def _files(row: dict[str, object]) -> set[Path]:
    """The files a status row names (session file, transcript, rollout, store) that exist."""
    out = set()
    for key in ("session", "transcript"):
        value = row.get(key)
        if isinstance(value, str) and value.startswith("/") and os.path.exists(value):
            out.add(Path(value))
            if os.path.exists(value + "-wal"):  # an SQLite store (OpenCode) is written to its WAL first
                out.add(Path(value + "-wal"))
    return out


class BoardScreen:
    """A board on a full screen, and what every live board does with it: the clocks' tick, ``q`` and
    Ctrl-C (and SIGTERM, a hang-up) to quit, a resize redrawn at once, ``r`` to look again
    (:meth:`look_again`)."""

    def __init__(self, board: Board, screen: FullScreen) -> None:
        self.board, self.screen = board, screen
        self.colour = not os.environ.get("NO_COLOR")
        self.quit = anyio.Event()

    def draw(self) -> None:
        columns, lines = self.screen.size()
        self.screen.draw(render(self.board, columns, lines, colour=self.colour))

    def look_again(self) -> None:
        """``r``: look at everything again now."""

    async def tick(self) -> None:
        while True:
            await anyio.sleep(TICK_S - time.time() % TICK_S)
            self.draw()

    async def keys(self) -> None:
        while True:
            await anyio.wait_readable(self.screen.fd)
            typed = self.screen.read_keys()
            if not typed or "q" in typed.lower():  # end of input counts as quitting too
                self.quit.set()
                return
            if "r" in typed.lower():
                self.look_again()

    async def signals(self) -> None:
        wanted = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGWINCH)
        with anyio.open_signal_receiver(*wanted) as sigs:
            async for signum in sigs:
                if signum == signal.SIGWINCH:
                    self.screen.invalidate()
                    self.draw()
                    continue
                self.quit.set()
                return

    def start(self, tg: TaskGroup) -> None:
        """Start the tick, the keys and the signals in ``tg``."""
        tg.start_soon(self.tick)
        tg.start_soon(self.keys)
        tg.start_soon(self.signals)


class TileFeed:
    """What the live board shows of this host's tiles, kept up to date: each tile looked at again when a
    file it writes changes (and, on the slow look, when its pane, processes or screen moved), the journal's
    hand-offs, the tokens. ``shown`` is called after each change — the terminal board draws, ``baton web``
    sends the change to its pages."""

    def __init__(self, config: Config, tiles: dict[str, TileRuntime], shown: Callable[[], None],
                 preview_chars: int = 80) -> None:
        self.preview_chars = preview_chars
        self.board = Board([(name, rt.adapter.name) for name, rt in tiles.items()], Path(config.path).name)
        self.tiles, self.shown = tiles, shown
        self.journal = default_journal_path()
        self.refresh_wake, self.usage_wake = Wake(), Wake()
        self.look_s = float(os.environ.get("BATON_BOARD_LOOK_S") or LOOK_EVERY_S)
        self.look_all_s = float(os.environ.get("BATON_BOARD_LOOK_ALL_S") or LOOK_ALL_S)
        #: the tiles whose files changed since the last refresh
        self.dirty: set[str] = set()
        self.files: dict[str, set[Path]] = {name: set() for name in tiles}
        #: when each tile's last look began (epoch seconds), and what it rested on at the last slow look
        self.looked: dict[str, float] = {}
        self.marks: dict[str, tuple[object, ...]] = {}
        #: the tiles looked at since the tokens were last read (only theirs are read again)
        self.usage_due: set[str] = set()

    def look_again(self) -> None:
        self.changed(set(self.tiles))

    def changed(self, names: set[str]) -> None:
        self.dirty |= names
        self.refresh_wake.set()

    async def _tile(self, name: str, seen: PaneInfo | None = None) -> None:
        """Look at tile ``name``; ``seen``: its pane as the slow look's ``list-panes`` showed it, so that
        the row's many lookups of the pane ask tmux nothing more."""
        runtime = self.tiles[name]
        self.looked[name] = time.time()
        with pane_lookups_shared():
            if seen is not None:
                runtime.ctx.seen(seen)
            started, row = await self._row(name, runtime)
        self.board.update(row, started=started)
        self.files[name] = _files(row)

    async def _row(self, name: str, runtime: TileRuntime) -> tuple[float | None, dict[str, object]]:
        """A working turn's start, and the tile's status row (its state in the board's words: an absent
        agent's pane says what runs there instead, a waiting one what it asks)."""
        try:
            row = await tile_row(name, runtime, self.preview_chars)
        except Exception as exc:  # one tile's surprise must not take the board down
            log.debug("board: %s: %s", name, exc, exc_info=True)
            row = {"tile": name, "state": f"error: {type(exc).__name__}"}
        started = None
        if state_words(row.get("state"))[0] == "working":
            try:
                started = await runtime.adapter.working_since()
            except Exception as exc:  # the board's own first sight is the clock then
                log.debug("board: %s: working_since: %s", name, exc, exc_info=True)
        return started, row

    async def refresh(self, names: set[str], seen: dict[str, PaneInfo] | None = None) -> dict[Path, set[str]]:
        """Look at ``names`` again (all at once: a slow tile does not hold up the others) and the journal;
        returns the files to follow and whose they are."""
        seen = seen or {}
        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(self._tile, name, seen.get(name))
        queued, last = await anyio.to_thread.run_sync(read_handoffs, self.journal, list(self.tiles))
        joining = await anyio.to_thread.run_sync(read_joining, self.journal)
        self.board.update_handoffs(queued, last, joining)
        owners: dict[Path, set[str]] = {}
        # the journal's folder, or the one above it ($XDG_STATE_HOME) until `baton run` makes it; never a
        # folder further up (the watcher would watch the nearest that exists: all of ~, say)
        if self.journal.parent.is_dir() or self.journal.parent.parent.is_dir():
            owners = {self.journal: {""}, self.journal.with_name(self.journal.name + "-wal"): {""}}
        for name, paths in self.files.items():
            for path in paths:
                owners.setdefault(path, set()).add(name)
        return owners

    async def _listed(self) -> dict[str, tuple[PaneInfo, int | None]]:
        """Each tile's pane as tmux lists it now, with the second its window last printed (one
        ``list-panes`` per tmux server); a tile not there (gone, not resolved yet) is missing."""
        servers = {id(rt.ctx.tmux): rt.ctx.tmux for rt in self.tiles.values()}
        listed: dict[int, dict[str, tuple[PaneInfo, int | None]]] = {}
        for key, tmux in servers.items():
            try:
                listed[key] = await tmux.panes_and_activity()
            except TmuxError:
                listed[key] = {}
        panes = {key: {pane: info for pane, (info, _) in each.items()} for key, each in listed.items()}
        out = {}
        for name, rt in self.tiles.items():
            info = rt.ctx.known_pane(panes[id(rt.ctx.tmux)])
            if info is not None:
                out[name] = (info, listed[id(rt.ctx.tmux)][info.pane_id][1])
        return out

    async def stale(self) -> tuple[set[str], dict[str, PaneInfo]]:
        """The slow look: the tiles to look at again, and their panes as listed. A tile is looked at when
        its pane is not listed (gone: the look says so), when its pane, processes or files (:func:`_mark`)
        changed since the last slow look, when its window printed since its last look began (tmux counts
        whole seconds: that second counts as since), or when it was last looked at :attr:`look_all_s` ago."""
        listed = await self._listed()
        infos = {name: info for name, (info, _) in listed.items()}
        marks = await anyio.to_thread.run_sync(
            lambda: {name: _mark(info, self.files[name]) for name, info in infos.items()})
        now, due = time.time(), set(self.tiles) - set(listed)
        for name, (_, printed) in listed.items():
            looked = self.looked.get(name, 0.0)
            if marks[name] != self.marks.get(name) or printed is None or printed >= int(looked) \
                    or now - looked >= self.look_all_s:
                due.add(name)
        self.marks = marks
        return due, {name: infos[name] for name in due if name in infos}

    async def refresh_loop(self, follow: Follow) -> None:
        names: set[str] = set(self.tiles)
        seen: dict[str, PaneInfo] = {}
        while True:
            follow.want(await self.refresh(names, seen))
            self.usage_due |= names
            self.usage_wake.set()
            self.shown()
            await anyio.sleep(SETTLE_S)
            if await self.refresh_wake.wait(self.look_s):
                names, seen, self.dirty = self.dirty - {""}, {}, set()
            else:
                names, seen = await self.stale()

    async def usage_loop(self) -> None:
        while True:
            await self.usage_wake.wait()
            names, self.usage_due = self.usage_due, set()
            for name, runtime in self.tiles.items():
                if name not in names:
                    continue
                try:
                    self.board.views[name].usage = await runtime.adapter.usage()
                except Exception as exc:  # an unknown shape shows nothing; it never ends the board
                    log.debug("board: %s: usage: %s", name, exc, exc_info=True)
            if names:
                self.shown()

    async def run(self) -> None:
        """Follow the tiles until cancelled: one file watcher, the refreshes, the tokens."""
        watcher = FileWatcher()
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher.run)
            tg.start_soon(self.refresh_loop, Follow(watcher, tg, self.changed))
            tg.start_soon(self.usage_loop)


class LiveBoard(BoardScreen):
    """The terminal's board of this host's tiles: a :class:`TileFeed` drawn on a full screen."""

    def __init__(self, config: Config, tiles: dict[str, TileRuntime], screen: FullScreen) -> None:
        self.feed = TileFeed(config, tiles, self.draw)
        super().__init__(self.feed.board, screen)

    def look_again(self) -> None:
        self.feed.look_again()


@contextmanager
def quiet_log(board: Board) -> Iterator[None]:
    """Log lines would scribble over the board: while it runs, the latest warning is its last line."""

    class ToBoard(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                board.note = f"{time.strftime('%H:%M:%S')} {record.getMessage()}"

    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers[:] = [ToBoard()]
    try:
        yield
    finally:
        root.handlers[:] = saved


async def run_live_board(config: Config, registries: Registries, tmux: Tmux,
                      stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> int:
    """Show the board until ``q``, Ctrl-C, SIGTERM or a hang-up; 0 when quit that way."""
    tiles = await build_tiles(config, registries.agents, tmux)
    with FullScreen(stdin, stdout) as screen:
        live = LiveBoard(config, tiles, screen)
        with quiet_log(live.board):
            live.draw()
            async with anyio.create_task_group() as tg:
                tg.start_soon(live.feed.run)
                live.start(tg)
                await live.quit.wait()
                tg.cancel_scope.cancel()
    return 0


def refusal(args: argparse.Namespace) -> int | None:
    """Why ``baton status --watch`` cannot draw here, said on standard error, as its exit status: 2 with
    ``--json``, 1 without a terminal; None when it can."""
    if args.json:
        print("baton status: --watch draws a board; --json prints once (use one of them)", file=sys.stderr)
        return 2
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("baton status --watch: needs a terminal (standard input and output); "
              "use baton status or baton status --json in scripts", file=sys.stderr)
        return 1
    return None


def show_live_board(args: argparse.Namespace, config: Config, registries: Registries) -> int:
    """``baton status --watch`` for ``config``'s tiles on this host: 0 when quit; 1 without a terminal."""
    refused = refusal(args)
    if refused is not None:
        return refused
    return anyio.run(lambda: run_live_board(config, registries, tmux_for(args, config)))
