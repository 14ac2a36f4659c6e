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
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from pydantic import BaseModel

from pipeline.plugin.events import Completion, Response
from pipeline.plugin.pastes import InputHolds, shows_text
from pipeline.plugin.transforms import NoOptions
from pipeline.plugin.turns import ResolveStep, TurnEnd, TurnMark
from pipeline.system import proc
from pipeline.system.tmux import PaneGone, ServerGone

if TYPE_CHECKING:
    from pathlib import Path

    from pipeline.plugin.usage import SessionUsage
    from pipeline.plugin.watcher import FileWatcher
    from pipeline.spool import HookRecord
    from pipeline.system.tmux import PaneInfo

__all__ = ["AgentAdapter", "Emit", "InputHolds", "ResolveStep", "TargetState", "TileContext", "TileSettings"]

Emit = Callable[[Completion], Awaitable[None]]
#: how a screen is captured: escapes, start, end (the arguments of :meth:`TileContext.capture`)
CaptureKind = tuple[bool, int | str | None, int | str | None]
TargetState = Literal["ready", "busy", "draft", "absent", "gone"]


class TileSettings(Protocol):
    """A tile's entry in routes.yaml, as its adapter sees it (read only; the engine's is a pydantic model)."""

    @property
    def pane(self) -> str:
        """The pane target as written: ``%3``, ``work:0.1``, ``title:NAME``."""
        ...

    @property
    def agent(self) -> str:
        """The adapter's name (``claude``, ``shell``, ``auto``)."""
        ...

    @property
    def command(self) -> str | None:
        """What ``baton up`` starts in the pane, if anything."""
        ...

    @property
    def cwd(self) -> str | None:
        """The folder ``baton up`` starts it in, if given."""
        ...

    @property
    def description(self) -> str:
        """The tile's ``description:`` ("" when none)."""
        ...


class TileContext(Protocol):
    """What an adapter gets from the engine for its tile (``self.ctx``): its name and pane, the pane's
    screen, the shared file watcher, and two calls back — a new session was found, the agent waits for a
    person. Adapters never run tmux themselves; the engine implements this (``pipeline.engine.context``)."""

    #: the tile's name in routes.yaml
    name: str
    #: the logger to tell the person things with (``batonpass``)
    log: logging.Logger

    @property
    def tile(self) -> TileSettings:
        """The tile's routes.yaml entry: ``tile.pane``, the pane target as written (``%3``, ``work:0.1``)."""
        ...

    @property
    def watcher(self) -> FileWatcher | None:
        """The engine's one watcher of files (``watcher.subscribe(paths)``), or None outside ``baton run``."""
        ...

    async def pane(self) -> PaneInfo:
        """The tile's pane (its ``%N``, pid, cursor, size…). Raises ``PaneGone`` / ``ServerGone``."""
        ...

    async def capture(self, *, escapes: bool = False, start: int | str | None = None,
                      end: int | str | None = None) -> str:
        """The pane's text (``escapes``: with SGR colours; ``start``/``end``: lines, as tmux's
        ``capture-pane -S/-E``). Raises ``PaneGone`` / ``ServerGone`` / ``TmuxError``."""
        ...

    async def pane_and_screen(self) -> tuple[PaneInfo, str]:
        """The pane and its screen as of one moment (one tmux round trip once the pane is known)."""
        ...

    async def capture_from(self, line: int) -> str:
        """Everything from absolute line ``line`` (see ``PaneInfo.cursor_line``) to the cursor."""
        ...

    async def printed_since(self, when: float) -> bool:
        """Whether the pane may have printed anything since ``when`` (epoch seconds); False only when tmux
        says it did not: an idle screen follower need not capture the screen again."""
        ...

    async def resolved(self) -> None:
        """Await this when following a new session of the agent (a new process, ``/clear``, a new file):
        the engine asks :meth:`AgentAdapter.finished_turns` again (catch-up)."""
        ...

    def waiting(self, reason: str | None) -> None:
        """Say on every look whether the agent waits for a person, and for what (``"permission prompt"``),
        None when it does not: the engine tells the person once per episode (``settings.notify``)."""
        ...


class AgentAdapter(abc.ABC):
    """Base class of every agent adapter: the contract (docs/adapters.md, member by member).

    Required: ``name``, ``process_names`` and three methods — how a turn ends (:meth:`follow`), what its
    answer is (:meth:`response`), and whether the pane can take a prompt now (:meth:`target_state`).
    Everything else is an opt-in capability with a neutral default, declared by overriding it: catch-up
    after a restart (:meth:`finished_turns`), crash recovery (:meth:`received`, :meth:`input_holds`,
    :meth:`current_draft`, :meth:`shows_paste`), start confirmation (:meth:`snapshot`,
    :meth:`turn_started`, :meth:`prompt_submitted`), files read offline (:meth:`extract_file`), hooks
    (:meth:`install_hooks`, :meth:`hook_completion`), the board (:meth:`last_response`, :meth:`usage`,
    :meth:`working_since`), ``baton resolve`` (:meth:`resolve`), ``baton approve``/``deny``
    (:meth:`answer_keys`). An agent read from its screen gets all of
    them from :class:`pipeline.plugin.screen.ScreenAdapter`, the base the built-ins share."""

    #: what `agent:` in routes.yaml names
    name: ClassVar[str] = ""
    #: /proc/PID/comm (or exe basename) values that identify this agent in a pane's process tree
    process_names: ClassVar[frozenset[str]] = frozenset()
    #: the most seconds between the paste and the Enter that submits it: the Enter goes as soon as the input
    #: shows the paste (:meth:`paste_landed`), at the latest this long after it
    submit_delay_s: ClassVar[float] = 0.2
    #: the fewest seconds between the paste and its Enter, however soon the paste shows: what the agent needs
    #: to take an Enter for a submit rather than part of the paste (measured per agent, docs/agents.md)
    submit_min_s: ClassVar[float] = 0.0
    #: how long to wait for the target to show that the turn started, before calling it unconfirmed
    confirm_timeout_s: ClassVar[float] = 5.0
    #: for an agent that may take the Enter for a newline (it read the paste and the Enter at once, starved of
    #: CPU: Gemini CLI): when the turn has not started this long after the Enter and :meth:`input_holds` says
    #: the input still holds the prompt, Enter is pressed again (and again, at this pace, until confirmed)
    enter_again_s: ClassVar[float | None] = None
    #: True when a False from :meth:`received` is proof that the agent never took the prompt (it shows every
    #: prompt it took: its records, a screen that always draws it): a paste whose turn did not start, with
    #: the target ready and its input empty, is then typed again (``pipeline/engine/stages/submit.py``).
    #: False (the default) for an agent that may take text and show none of it: it is never typed twice
    retype_lost_paste: ClassVar[bool] = False
    #: True for adapters that answer from the screen; others get the ``terminal`` adapter as fallback
    reads_screen: ClassVar[bool] = False
    #: a short description for `baton plugins`
    summary: ClassVar[str] = ""
    #: the options :meth:`extract_file` takes (``baton extract --option NAME=VALUE``), a pydantic model like a
    #: transform's ``Options``: ``baton extract`` validates them with it, so a wrong one is named, not raised
    ExtractOptions: ClassVar[type[BaseModel]] = NoOptions
    #: what the files :meth:`extract_file` reads are, in words ("a Codex rollout"), for ``baton extract``
    file_kind: ClassVar[str] = ""
    #: the screen :meth:`target_state` reads, as :meth:`TileContext.capture`'s (escapes, start, end): the
    #: first hand-off's pane lookup brings it in its round trip (later ones learn it from what was asked)
    readiness_screen: ClassVar[CaptureKind | None] = (False, None, None)

    def __init__(self, ctx: TileContext) -> None:
        self.ctx = ctx

    @classmethod
    def claims_process(cls, p: proc.Proc) -> bool:
        """Whether the process ``p`` under a pane is this agent (``agent: auto``, ``absent``, the presence
        check all ask). By default its comm or executable's name is one of :attr:`process_names`; an agent
        that runs under a generic name (``node``) narrows it down from more (its argv, its environment)."""
        return p.comm in cls.process_names or p.exe_name in cls.process_names

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
    def recognizes_file(cls, path: Path) -> bool:
        """Whether ``path`` (a regular file) is one of this agent's by its shape — its first records, its
        header — so that ``baton extract FILE`` without ``--agent`` finds whose it is (and says so when
        ``--agent`` names another). Asked of every adapter for every file: read little
        (:func:`pipeline.plugin.tools.json_head`), never raise. Default: False."""
        return False

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

    async def paste_landed(self, text: str) -> bool:
        """Between a paste and its Enter: whether the input shows ``text`` (sanitized) yet, as the text or as
        the agent's placeholder for it — the Enter goes then (:attr:`submit_min_s` at the soonest). By
        default :meth:`input_holds` says ``"prompt"``; an adapter that cannot read its input gets the full
        :attr:`submit_delay_s`."""
        return await self.input_holds(text) == "prompt"

    def shows_paste(self, draft: str, text: str) -> bool:
        """Whether the input line's ``draft`` is ``text`` pasted and not submitted. By default the text
        drawn inline (:func:`pipeline.plugin.pastes.shows_text`); an agent that draws a long paste as a
        placeholder adds its rule, with the count that must match (docs/agent-versions.md)."""
        return shows_text(draft, text)

    #: the screen :meth:`answer_keys` reads, as :meth:`TileContext.capture`'s (escapes, start, end): with SGR
    #: escapes, so a menu whose selection is drawn only in colour can be read
    answer_screen: ClassVar[CaptureKind] = (True, None, None)

    def answer_keys(self, screen: str, approve: bool) -> list[str] | None:
        """``baton approve`` / ``baton deny``: the tmux key names (``send-keys``: ``Down``, ``Enter``,
        ``y``) that answer the permission prompt on ``screen`` (captured as :attr:`answer_screen` says) —
        allowing it once (``approve``) or refusing it — or None when ``screen`` shows no permission prompt
        now (then nothing is typed, and the person is told so). The keys are sent one at a time; the engine
        then looks again and reports a prompt still on screen. By default None: an agent with no prompts,
        or whose prompts this adapter cannot answer. Helpers: :mod:`pipeline.plugin.dialogs`."""
        return None

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
        return proc.find_first(info.pid, self.claims_process)

    def pane_step(self, info: PaneInfo) -> ResolveStep:
        """The first step of every resolution: which pane the tile's target names, and its shell's pid."""
        return ResolveStep("pane", True,
                           f"{self.ctx.tile.pane} -> {info.pane_id} ({info.address}), pid {info.pid}",
                           {"pane_id": info.pane_id, "pid": info.pid})

    async def find_process_steps(self) -> list[ResolveStep]:
        info = await self.ctx.pane()
        steps = [self.pane_step(info)]
        found = proc.find_first(info.pid, self.claims_process) if self.process_names else None
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
