"""The engine's side of an adapter's context: one :class:`EngineContext` per tile, implementing the plugin
API's :class:`pipeline.plugin.agents.TileContext` protocol, plus what only the engine uses — the catch-up and
waiting callbacks, the pane id bookkeeping, and the shared pane lookups that save the dispatcher tmux round
trips (:func:`pane_lookups_shared`; docs/performance.md measures them)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipeline.plugin.agents import AgentAdapter, CaptureKind
from pipeline.system.tmux import PaneGone, ServerGone, TmuxError

if TYPE_CHECKING:
    from pipeline.engine.config import Tile
    from pipeline.engine.watch import FileWatcher
    from pipeline.system.tmux import PaneInfo, Tmux

__all__ = ["EngineContext", "engine_context", "look_again", "make_adapter", "pane_lookups_shared",
           "readiness_check"]



@dataclass
class _Looks:
    """What the tiles' panes showed at one look, within one :func:`pane_lookups_shared` block."""

    #: by TileContext id
    panes: dict[int, PaneInfo] = field(default_factory=dict)
    #: by TileContext id and capture kind: a screen taken with the pane's lookup, not yet asked for
    screens: dict[tuple[int, CaptureKind], str] = field(default_factory=dict)
    #: within :func:`readiness_check`: the lookups bring the screen, the captures say which
    readiness: bool = False

    def clear(self) -> None:
        self.panes.clear()
        self.screens.clear()


#: the looks of the current :func:`pane_lookups_shared` block of this task
_looked_up: ContextVar[_Looks | None] = ContextVar("batonpass_panes_looked_up", default=None)


@contextmanager
def pane_lookups_shared() -> Iterator[None]:
    """Within this block, in this task, each tile's pane is asked of tmux once: the dispatcher's readiness
    check, the adapter's own and the paste that follows all see that one answer (a tmux round trip each
    saved on the way from an answer to the paste). The screen the tile's last readiness check captured
    is asked in the same round trip as the pane. :func:`look_again` ends the sharing early; nothing
    outside the block (another task, a follower) is affected."""
    token = _looked_up.set(_Looks())
    try:
        yield
    finally:
        _looked_up.reset(token)


@contextmanager
def readiness_check() -> Iterator[None]:
    """Marks the dispatcher's look at whether a target can take a prompt, within
    :func:`pane_lookups_shared`: its pane lookup brings, in the same round trip, the screen the tile's
    previous readiness check captured (the adapter's own check does not change between hand-offs)."""
    looks = _looked_up.get()
    if looks is None:
        yield
        return
    looks.readiness = True
    try:
        yield
    finally:
        looks.readiness = False


def look_again() -> None:
    """Within :func:`pane_lookups_shared`: the next lookups ask tmux again (after waiting, say)."""
    looks = _looked_up.get()
    if looks is not None:
        looks.clear()


@dataclass
class EngineContext:
    """The engine's services for one tile (the plugin API's ``TileContext``). Shared by the tile's adapter
    and the stages."""

    name: str
    tile: Tile
    tmux: Tmux
    watcher: FileWatcher | None = None
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("batonpass"))
    #: set by the engine: what follows an adapter's report of a new session (the catch-up)
    on_resolved: Callable[[], Awaitable[None]] | None = None
    #: set by the engine: what hears that the agent waits for a person (see :meth:`waiting`)
    on_waiting: Callable[[str | None], None] | None = None
    #: what the agent waits for a person for, as its adapter last said (None: it does not wait)
    waiting_for: str | None = None
    _pane_id: str | None = None
    _server_pid: int | None = None
    #: the capture the tile's last readiness check asked for, or before any the one its adapter declared
    #: (taken with the next lookup)
    _screen_kind: CaptureKind | None = None

    def expect_readiness_screen(self, kind: CaptureKind | None) -> None:
        """What the tile's adapter says its readiness check will capture, until a check asks for itself."""
        if self._screen_kind is None:
            self._screen_kind = kind

    async def resolved(self) -> None:
        """Adapters await this when they start following a new session of their agent (a new process,
        ``/clear``, a new rollout): the engine asks :meth:`AgentAdapter.finished_turns` again."""
        if self.on_resolved is not None:
            await self.on_resolved()

    def waiting(self, reason: str | None) -> None:
        """Adapters call this whenever they read whether their agent waits for a person: ``reason`` says
        what for (``"permission prompt"``), None that it does not. Call it on every look: the engine tells
        the person once per episode (``settings.notify``)."""
        self.waiting_for = reason
        if self.on_waiting is not None:
            self.on_waiting(reason)

    async def pane(self) -> PaneInfo:
        """The tile's pane, resolved once to its ``%N`` id and addressed by id afterwards.

        Pane ids are only unique within one tmux server: when the server was restarted, a ``%N`` from
        routes.yaml cannot be trusted (it may name another program's pane now) and the tile is reported
        gone; a ``session:window.pane`` or ``title:`` target is resolved again.
        Raises :class:`pipeline.system.tmux.PaneGone` / :class:`pipeline.system.tmux.ServerGone`."""
        looks = _looked_up.get()
        if looks is not None and id(self) in looks.panes:
            return looks.panes[id(self)]
        try:
            info = await self._pane(looks)
        except (PaneGone, ServerGone):
            self._pane_id = None  # resolved again next time; the server pid stays to tell a new server apart
            raise
        if looks is not None:
            looks.panes[id(self)] = info
        return info

    async def _pane(self, looks: _Looks | None) -> PaneInfo:
        if self._pane_id is not None:
            kind = self._screen_kind if looks is not None and looks.readiness else None
            if kind is None:
                info, screen = await self.tmux.pane(self._pane_id), None
            else:
                info, screen = await self.tmux.pane_and_capture(self._pane_id, escapes=kind[0], start=kind[1],
                                                                end=kind[2])
            if info.server_pid == self._server_pid:
                if looks is not None and kind is not None and screen is not None:
                    looks.screens[(id(self), kind)] = screen
                return info
            self._pane_id = None
        if self._server_pid is not None and self.tile.pane.startswith("%"):
            current = await self.tmux.pane(self.tile.pane)
            if current.server_pid != self._server_pid:
                raise PaneGone(
                    f"pane {self.tile.pane} belonged to a tmux server that has exited (pid "
                    f"{self._server_pid}); name the pane by session:window.pane or title: to follow it"
                )
        info = await self.tmux.resolve(self.tile.pane)
        self._pane_id, self._server_pid = info.pane_id, info.server_pid
        return info

    @property
    def resolved_pane_id(self) -> str | None:
        """The ``%N`` the tile's pane was resolved to, if it was."""
        return self._pane_id

    def known_pane(self, listed: dict[str, PaneInfo]) -> PaneInfo | None:
        """The tile's pane among ``listed`` (``list-panes`` by pane id), if it was resolved before and is
        there on the same server; None means: ask :meth:`pane`."""
        info = listed.get(self._pane_id) if self._pane_id is not None else None
        return info if info is not None and info.server_pid == self._server_pid else None

    def seen(self, info: PaneInfo) -> None:
        """Within :func:`pane_lookups_shared`: the tile's pane as a ``list-panes`` of this moment showed it
        (``info`` from :meth:`known_pane`), so that the lookups of this block take it without asking."""
        looks = _looked_up.get()
        if looks is not None and info.pane_id == self._pane_id and info.server_pid == self._server_pid:
            looks.panes[id(self)] = info

    def forget_pane(self) -> None:
        """Resolve the pane target again next time (after its pane or server went away)."""
        self._pane_id = None  # the server pid stays: it tells a restarted server apart
        looks = _looked_up.get()
        if looks is not None:
            looks.panes.pop(id(self), None)
            looks.screens = {k: v for k, v in looks.screens.items() if k[0] != id(self)}

    async def capture(self, *, escapes: bool = False, start: int | str | None = None,
                      end: int | str | None = None) -> str:
        """The pane's text (see :meth:`pipeline.system.tmux.Tmux.capture`), with the lookup that checks the
        pane is still the tile's in the same round trip. Within :func:`pane_lookups_shared`, the screen
        taken with the pane's lookup when it is of this kind; the kind asked is remembered, so that the
        tile's next look takes it in the same round trip."""
        kind: CaptureKind = (escapes, start, end)
        looks = _looked_up.get()
        if looks is not None and looks.readiness:
            self._screen_kind = kind
            screen = looks.screens.pop((id(self), kind), None)
            if screen is not None:
                return screen
        return (await self._pane_and_capture(kind, looks))[1]

    async def pane_and_screen(self) -> tuple[PaneInfo, str]:
        """The pane and its screen as of one moment, in one tmux round trip once the pane is resolved: a
        follower that reads the screen asks for both several times a second, for every tile."""
        return await self._pane_and_capture((False, None, None), _looked_up.get())

    async def _pane_and_capture(self, kind: CaptureKind, looks: _Looks | None) -> tuple[PaneInfo, str]:
        """One round trip where the pane is resolved and not looked up yet in this block (a follower's
        look at the screen was two: the lookup, then the capture); otherwise the lookup, then the capture."""
        escapes, start, end = kind
        if self._pane_id is not None and (looks is None or id(self) not in looks.panes):
            try:
                info, screen = await self.tmux.pane_and_capture(self._pane_id, escapes=escapes, start=start,
                                                                end=end)
            except (PaneGone, ServerGone):
                self._pane_id = None
                raise
            if info.server_pid == self._server_pid:
                if looks is not None:
                    looks.panes[id(self)] = info
                if screen is None:  # no control mode, or the capture failed: tmux's own message then
                    screen = await self.tmux.capture(info.pane_id, escapes=escapes, start=start, end=end)
                return info, screen
        info = await self.pane()
        return info, await self.tmux.capture(info.pane_id, escapes=escapes, start=start, end=end)

    async def printed_since(self, when: float) -> bool:
        """Whether the pane may have printed anything since ``when`` (epoch seconds). False only when tmux
        says its window printed nothing in that second or later (tmux keeps whole seconds): a screen
        follower that looked at ``when`` need not capture the screen again. One short ``list-panes`` a
        beat answers every tile of the server; True whenever that cannot tell (no resolved pane, no
        such pane listed, tmux unreachable), so the caller looks."""
        if self._pane_id is None:
            return True
        try:
            second = (await self.tmux.window_activity(fresh_s=0.5)).get(self._pane_id)
        except TmuxError:
            return True
        return second is None or second >= int(when)

    async def capture_from(self, line: int) -> str:
        """Everything from absolute line ``line`` (see :attr:`PaneInfo.cursor_line`) to the cursor."""
        info = await self.pane()
        start = max(line - info.history_size, -info.history_size)
        return await self.tmux.capture(info.pane_id, start=start, end=info.cursor_y)


def make_adapter(cls: type[AgentAdapter], ctx: EngineContext) -> AgentAdapter:
    """An adapter of ``cls`` on ``ctx``; the context learns which screen the adapter's readiness check
    reads, so that the tile's first readiness look brings it in the same round trip as the pane."""
    adapter = cls(ctx)
    ctx.expect_readiness_screen(cls.readiness_screen)
    return adapter


def engine_context(adapter: AgentAdapter) -> EngineContext:
    """The engine's context behind ``adapter`` (every adapter the engine makes has one): what types into its
    pane and keeps the tile's bookkeeping."""
    ctx = adapter.ctx
    if not isinstance(ctx, EngineContext):
        raise TypeError(f"{type(adapter).__name__} was not made by the engine "
                        f"(its ctx is a {type(ctx).__name__})")
    return ctx

