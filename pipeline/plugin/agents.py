"""What an agent adapter is, and what the engine hands it.

An adapter is instantiated once per tile with a :class:`TileContext`. It knows one kind of agent: how to
tell that a turn finished (:meth:`AgentAdapter.follow`), where the clean answer is
(:meth:`AgentAdapter.response`), and whether the pane can take a prompt now
(:meth:`AgentAdapter.target_state`).
Adapters never run tmux themselves; they ask the context, which is the engine's side of the contract.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel

from pipeline.plugin.events import Completion, Response
from pipeline.plugin.pastes import InputHolds, shows_text
from pipeline.plugin.transforms import NoOptions
from pipeline.plugin.turns import ResolveStep, TurnEnd, TurnMark
from pipeline.system import proc
from pipeline.system.tmux import PaneGone, ServerGone, TmuxError

if TYPE_CHECKING:
    from pathlib import Path

    from pipeline.engine.config import Tile
    from pipeline.engine.watch import FileWatcher
    from pipeline.plugin.usage import SessionUsage
    from pipeline.spool import HookRecord
    from pipeline.system.tmux import PaneInfo, Tmux

__all__ = ["AgentAdapter", "Emit", "InputHolds", "ResolveStep", "TargetState", "TileContext", "look_again",
           "pane_lookups_shared", "readiness_check"]

Emit = Callable[[Completion], Awaitable[None]]
TargetState = Literal["ready", "busy", "draft", "absent", "gone"]


#: how a screen was captured: escapes, start, end (the arguments of :meth:`TileContext.capture`)
CaptureKind = tuple[bool, int | str | None, int | str | None]


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
class TileContext:
    """The engine's services for one tile. Shared by the tile's adapter and the stages."""

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


class AgentAdapter(abc.ABC):
    """Base class of every agent adapter: the contract (docs/adapters.md, member by member).

    Required: ``name``, ``process_names`` and three methods — how a turn ends (:meth:`follow`), what its
    answer is (:meth:`response`), and whether the pane can take a prompt now (:meth:`target_state`).
    Everything else is an opt-in capability with a neutral default, declared by overriding it: catch-up
    after a restart (:meth:`finished_turns`), crash recovery (:meth:`received`, :meth:`input_holds`,
    :meth:`current_draft`, :meth:`shows_paste`), start confirmation (:meth:`snapshot`,
    :meth:`turn_started`, :meth:`prompt_submitted`), files read offline (:meth:`extract_file`), hooks
    (:meth:`install_hooks`, :meth:`hook_completion`), the board (:meth:`last_response`, :meth:`usage`,
    :meth:`working_since`), ``baton resolve`` (:meth:`resolve`). An agent read from its screen gets all of
    them from :class:`pipeline.plugin.screen.ScreenAdapter`, the base the built-ins share."""

    #: what `agent:` in routes.yaml names
    name: ClassVar[str] = ""
    #: /proc/PID/comm (or exe basename) values that identify this agent in a pane's process tree
    process_names: ClassVar[frozenset[str]] = frozenset()
    #: seconds between the paste and the Enter that submits it
    submit_delay_s: ClassVar[float] = 0.2
    #: how long to wait for the target to show that the turn started, before calling it unconfirmed
    confirm_timeout_s: ClassVar[float] = 5.0
    #: True for adapters that answer from the screen; others get the ``terminal`` adapter as fallback
    reads_screen: ClassVar[bool] = False
    #: a short description for `baton plugins`
    summary: ClassVar[str] = ""
    #: the options :meth:`extract_file` takes (``baton extract --option NAME=VALUE``), a pydantic model like a
    #: transform's ``Options``: ``baton extract`` validates them with it, so a wrong one is named, not raised
    ExtractOptions: ClassVar[type[BaseModel]] = NoOptions
    #: the screen :meth:`target_state` reads, as :meth:`TileContext.capture`'s (escapes, start, end): the
    #: first hand-off's pane lookup brings it in its round trip (later ones learn it from what was asked)
    readiness_screen: ClassVar[CaptureKind | None] = (False, None, None)

    def __init__(self, ctx: TileContext) -> None:
        self.ctx = ctx
        ctx.expect_readiness_screen(self.readiness_screen)

    @abc.abstractmethod
    async def follow(self, emit: Emit) -> None:
        """Run until cancelled, awaiting ``emit(Completion)`` each time the tile finishes a turn.
        The detector deduplicates by ``turn_id``, so several signals may report the same turn."""

    @abc.abstractmethod
    async def response(self, completion: Completion) -> Response | None:
        """The clean answer of ``completion``'s turn, or None to let the terminal fallback answer."""

    async def finished_turns(self, since: float) -> list[TurnEnd] | None:
        """Catch-up: the turns of this tile's current session that ended at or after ``since`` (epoch
        seconds), oldest first, read from the agent's files. The engine asks when it starts following the
        tile and again whenever the adapter reports a new session (:meth:`TileContext.resolved`); the journal
        decides which were handed off already. None: this adapter cannot read past turns (screen adapters)."""
        return None

    def prompt_submitted(self, text: str, at: float) -> None:
        """Called by the dispatcher right after it submitted ``text`` (already sanitized) at ``at`` (epoch
        seconds). Adapters that tell panes apart by the last prompt, or treat a submit as a turn start,
        keep what they need here; the engine keeps no such field for them."""
        return None

    async def last_response(self) -> Response | None:
        """The answer of the tile's latest finished turn, whenever that was (``baton status``,
        ``baton preview``), or None when this adapter cannot tell (the screen is asked next)."""
        return None

    async def usage(self) -> SessionUsage | None:
        """Tokens and cost of the agent's current session so far, read from its own files (the live board
        asks after each change: read only what was appended since), or None when the agent records no
        usage, or none of a shape this adapter knows."""
        return None

    async def working_since(self) -> float | None:
        """When the turn the agent is working on began (epoch seconds), read from the agent's own records
        (a prompt's timestamp, a status change), or None when no turn runs or the agent does not say. The
        live board's ``working 2m10s`` clock counts from it, so a board started mid-turn shows the turn's
        age; without it, the board counts from when it first saw the tile working."""
        return None

    @abc.abstractmethod
    async def target_state(self) -> TargetState:
        """Whether a prompt may be typed now: ``ready``; ``busy`` or ``draft`` (wait); ``absent`` (the
        pane shows no such agent — never type there); ``gone`` (no pane). Asked only once the engine saw
        the pane alive and running a process of :attr:`process_names`."""

    async def presence_state(self, info: PaneInfo) -> TargetState:
        """For ``baton run``'s presence log, asked every second of every tile whose agent process is not
        known to run (``info``: its pane, just looked up and alive): ``absent`` or ``gone`` when the pane
        does not run the agent, any other state when it does. :meth:`target_state` by default; an adapter
        whose readiness reads the screen says it from cheaper facts."""
        return await self.target_state()

    async def snapshot(self) -> TurnMark:
        """What :meth:`turn_started` needs to see that a prompt submitted after now started a turn."""
        return TurnMark()

    async def turn_started(self, before: TurnMark) -> bool:
        """True once the agent shows it took the prompt submitted after ``snapshot()`` returned ``before``."""
        return True

    async def hook_completion(self, record: HookRecord) -> Completion | None:
        """A record from this agent's own completion hook (see :mod:`pipeline.spool`), offered to every
        tile of this agent kind: return the Completion if the record is this tile's, else None."""
        return None

    @classmethod
    def extract_file(cls, path: Path, **options: Any) -> Response | None:
        """``baton extract``: the last finished turn's answer from one of this agent's files, or None
        if the file holds no finished turn. ``options`` are fields of :attr:`ExtractOptions` (the same
        signature in every adapter: an adapter declares its options there, never as extra parameters).
        Adapters without files raise NotImplementedError."""
        raise NotImplementedError(f"the {cls.name} adapter reads no files")

    @classmethod
    def install_hooks(cls, hook_command: list[str]) -> str:
        """``baton hooks install``: add ``hook_command`` (it runs :mod:`pipeline.spool`) to the agent's own
        settings without destroying what the user has there. Returns what was changed, for the user."""
        raise NotImplementedError(f"the {cls.name} adapter has no hooks to install")

    @classmethod
    def has_hooks(cls) -> bool:
        """Whether this adapter has completion hooks to install (it overrides :meth:`install_hooks`):
        what ``baton hooks install`` without ``--agent`` installs."""
        return any("install_hooks" in vars(k) for k in cls.__mro__[:cls.__mro__.index(AgentAdapter)])

    async def current_draft(self) -> str:
        """Text waiting in the agent's input line (a person's draft, or a paste a crash left unsubmitted)."""
        return ""

    async def received(self, text: str) -> bool | None:
        """After a crash mid-delivery: does the agent show it took ``text`` as a prompt? True, False, or
        None when it cannot tell (then batonpass does not type it again: it never resends blindly)."""
        return None

    async def input_holds(self, text: str) -> InputHolds | None:
        """After a crash between a paste and its Enter: what the agent's input holds, compared with
        ``text`` (the sanitized prompt batonpass pasted): ``"prompt"`` (that paste, as the text or as the
        agent's placeholder for it: the dispatcher presses Enter once), ``"other"`` (a person's draft:
        kept, waited for), ``"empty"``; None when the input cannot be read. By default the input line
        :meth:`current_draft` reads, judged by :meth:`shows_paste`."""
        draft = (await self.current_draft()).strip()
        if not draft:
            return "empty"
        return "prompt" if self.shows_paste(draft, text) else "other"

    def shows_paste(self, draft: str, text: str) -> bool:
        """Whether the input line's ``draft`` is ``text`` pasted and not submitted. By default the text
        drawn inline (:func:`pipeline.plugin.pastes.shows_text`); an agent that draws a long paste as a
        placeholder adds its rule, with the count that must match (docs/agent-versions.md)."""
        return shows_text(draft, text)

    async def resolve(self) -> list[ResolveStep]:
        """The chain from pane to answer, each step shown by ``baton resolve``."""
        return await self.find_process_steps()

    # ---- helpers for subclasses ------------------------------------------------------------------

    async def live_pane(self) -> PaneInfo | None:
        """The tile's pane while it exists and its program runs; None when it (or its server) is gone."""
        try:
            info = await self.ctx.pane()
        except (PaneGone, ServerGone):
            return None
        return None if info.dead else info

    async def agent_process(self) -> proc.Proc | None:
        """This agent's process in the tile's pane, or None (the pane runs something else)."""
        info = await self.ctx.pane()
        return proc.find_agent(info.pid, self.process_names)

    def pane_step(self, info: PaneInfo) -> ResolveStep:
        """The first step of every resolution: which pane the tile's target names, and its shell's pid."""
        return ResolveStep("pane", True,
                           f"{self.ctx.tile.pane} -> {info.pane_id} ({info.address}), pid {info.pid}",
                           {"pane_id": info.pane_id, "pid": info.pid})

    async def find_process_steps(self) -> list[ResolveStep]:
        info = await self.ctx.pane()
        steps = [self.pane_step(info)]
        found = proc.find_agent(info.pid, self.process_names) if self.process_names else None
        if self.process_names:
            names = ", ".join(sorted(self.process_names))
            steps.append(
                ResolveStep(
                    "process",
                    found is not None,
                    f"{found.comm} pid {found.pid}"
                    if found
                    else f"no process named {names} under pid {info.pid}",
                    found.pid if found else None,
                )
            )
        return steps
