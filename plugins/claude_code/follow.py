"""Following one Claude Code tile's files: the session file's status and the transcript's end-of-turn lines.

The watcher's change events are hints; what ended is read from the files (:mod:`plugins.claude_code.reader`).
When the process shows no session file and no transcript, the screen is followed instead until they appear.
Rules that need time rather than a line — the session idle with no end on disk, the transcript quiet after a
final-looking answer (versions without a session file), a held turn whose background agents finished with no
turn after them — are the deadlines of :meth:`FileFollowing._on_status`.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, ClassVar

import anyio

from pipeline.plugin.agents import Emit
from pipeline.plugin.events import Completion
from pipeline.plugin.screen import ScreenAdapter
from pipeline.plugin.tools import proc
from plugins.claude_code.files import SessionFile, project_folder_name, read_session_file, session_owner
from plugins.claude_code.reader import TranscriptTail
from plugins.claude_code.resolve import Resolution, resolve_process
from plugins.claude_code.turns import TurnEnd

__all__ = ["FileFollowing", "waiting_reason"]

log = logging.getLogger("batonpass")


def waiting_reason(session: SessionFile) -> str | None:
    """What the session waits for a person for (``waitingFor``: "permission prompt", "dialog open"), or
    None when its status is not ``waiting``."""
    if session.status != "waiting":
        return None
    why = session.waiting_for
    return why.strip() if isinstance(why, str) and why.strip() else "for a person"


class FileFollowing(ScreenAdapter):
    """The completion side of the Claude Code adapter (``follow``); the adapter supplies ``_resolve``."""

    #: how long the session file may be missing after start before the screen is followed instead
    startup_grace_s: ClassVar[float] = 10.0
    #: after the session turns idle, how long the transcript may take to show how the turn ended (usually
    #: ~0.2 s; generous because calling a turn that did end "failed" would lose its hand-off, while a turn
    #: Esc'd before any text — the only one that never shows an end — has nothing to hand off anyway)
    idle_grace_s: ClassVar[float] = 5.0
    #: with no session file (versions before it), how long the transcript must stay quiet after a final-
    #: looking answer before the turn counts as ended (1.0.x wrote ``stop_reason: null`` on final messages)
    quiet_s: ClassVar[float] = 5.0
    #: after the background agents' work, how long an idle session may show no turn before the held turn is
    #: reported as the completion itself (normally a ``<task-notification>`` turn follows within ~1 s)
    held_grace_s: ClassVar[float] = 3.0
    #: how often a follower checks that its process still lives (processes send no file events)
    liveness_s: ClassVar[float] = 2.0
    #: with no session file to say it, how often the screen is read for a permission prompt
    screen_look_s: ClassVar[float] = 0.5

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._ends: OrderedDict[str, TurnEnd] = OrderedDict()
        self._resolution: Resolution | None = None
        #: the pane whose chain ``_resolution`` is
        self._resolved_pane: str | None = None

    async def _resolve(self) -> Resolution:
        raise NotImplementedError

    # ---- completion ------------------------------------------------------------------------------

    async def follow(self, emit: Emit) -> None:
        watcher = self.ctx.watcher
        if watcher is None:  # outside the daemon: nothing shared to watch files with
            await super().follow(emit)
            return
        while True:
            res = await self._look_once_pane_is_there(self._resolve)
            why = self._why_not_files(res)
            self._say(why)
            if res.process is None:  # a process starting sends no file event: look again in a while
                self.ctx.waiting(None)  # no Claude Code, nobody waiting (a reload's carried episode ends)
                await anyio.sleep(self.liveness_s)
                continue
            if why.startswith("waiting") and res.config is not None:
                with watcher.subscribe(res.config / "sessions") as sub:
                    await sub.wait(self.liveness_s)
                continue
            if why:
                await self._follow_screen_until_files(emit)
                continue
            await self._follow_files(emit, res)
            self.ctx.waiting(None)  # the process exited or a new session began: its own status says again

    def _why_not_files(self, res: Resolution) -> str:
        if res.process is None:
            return "no Claude Code process in the pane; waiting for one"
        if res.session is not None or res.transcript is not None:
            return ""
        age = time.time() - res.started_at
        if age < self.startup_grace_s:
            return f"waiting for Claude Code's session file (pid {res.process.pid} started {age:.1f}s ago)"
        return (f"following the screen: the chain stopped at {res.stopped_at} "
                f"({next((s.detail for s in res.steps if not s.ok), '')})")

    async def _follow_screen_until_files(self, emit: Emit) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(super().follow, emit)
            while True:
                await anyio.sleep(self.liveness_s)
                res = await self._resolve()
                if res.process is None or res.session is not None or res.transcript is not None:
                    log.info("%s: Claude Code's files are readable again; leaving the screen", self.ctx.name)
                    tg.cancel_scope.cancel()
                    return

    async def _follow_files(self, emit: Emit, res: Resolution) -> None:
        """Follow one process's session file and transcript; return when the chain must be run again.
        What the transcript held when following began is the engine's to catch up on: once the tail is
        at the file's end, the engine is told (``ctx.resolved``) and asks ``finished_turns``."""
        assert self.ctx.watcher is not None and res.process is not None and res.config is not None
        pid, start_ticks = res.process.pid, res.process.start_ticks
        # the process's own file, or the one whose ``tmux`` key names this pane (resolve.py)
        session_path = (
            res.session.path if res.session is not None else res.config / "sessions" / f"{pid}.json"
        )
        folder = res.project_dir or res.config / "projects" / project_folder_name(res.cwd or "/")
        tail = self._tail_for(res.transcript, existed=True)
        await self.ctx.resolved()
        session_id = res.session.session_id if res.session else None
        if res.session is not None:
            self.ctx.waiting(waiting_reason(res.session))
        idle_deadline: float | None = None
        # a turn left open while the session is idle already is history, not news
        handled: set[str | None] = {None, tail.tracker.key if tail and tail.tracker.open else None}
        log.info(
            "%s: following %s (rule %s) and %s",
            self.ctx.name,
            res.transcript or f"{folder}/ (no transcript yet)",
            res.rule or "-",
            session_path.name,
        )
        #: transcripts of this folder that other live sessions write (pid, start ticks): not ours to re-check
        others: dict[Path, tuple[int, int]] = {}
        with self.ctx.watcher.subscribe(session_path, folder) as sub:
            async with proc.woken_on_exit(pid, start_ticks, sub.wake, poll_s=self.liveness_s):
                while True:
                    changed = await sub.wait(self._wait_s(idle_deadline, res))
                    live = proc.read_proc(pid)
                    if live is None or live.start_ticks != start_ticks:
                        log.info("%s: Claude Code pid %d exited", self.ctx.name, pid)
                        return
                    session = _read_session(session_path)
                    if session is not None and session.session_id != session_id:
                        return  # a new session (or the file appeared): run the chain again
                    await self._report_waiting(session, res)
                    news = _unclaimed_transcripts(changed, folder, tail, others, res.config, session_id, pid)
                    if tail is None or news:
                        tail = self._retarget(live, tail)
                    for end in tail.read_new() if tail else []:
                        await self._emit_end(emit, end, "transcript")
                    status = _status(session, tail, changed)
                    idle_deadline = await self._on_status(emit, tail, status, idle_deadline, handled)

    def _wait_s(self, idle_deadline: float | None, res: Resolution) -> float | None:
        """How long to wait for a file event: until the status deadline, and with no session file no
        longer than :attr:`screen_look_s` (only the screen tells a prompt then)."""
        timeout = None if idle_deadline is None else max(idle_deadline - time.monotonic(), 0.0)
        if res.session is None:
            timeout = min(timeout if timeout is not None else self.screen_look_s, self.screen_look_s)
        return timeout

    async def _report_waiting(self, session: SessionFile | None, res: Resolution) -> None:
        """Whether the agent waits for a person: from the session file, or with none from the screen."""
        if session is not None:
            self.ctx.waiting(waiting_reason(session))
        elif res.session is None:
            await self.look_for_person()

    def _retarget(self, live: proc.Proc, tail: TranscriptTail | None) -> TranscriptTail | None:
        """Run the chain again for the live process: a transcript other than the followed one is read
        from its first line from now on."""
        fresh = resolve_process(live)
        if fresh.transcript is not None and (tail is None or fresh.transcript != tail.path):
            log.info("%s: transcript is now %s (rule %s)", self.ctx.name, fresh.transcript, fresh.rule)
            tail = self._tail_for(fresh.transcript, existed=False)
            self._resolution = fresh
        return tail

    def _tail_for(self, path: Path | None, *, existed: bool) -> TranscriptTail | None:
        """A reader for ``path``: from its current end if it was there when following began, else from its
        first line (it appeared while following, so every line of it is news)."""
        if path is None:
            return None
        tail = TranscriptTail(path, from_start=not existed)
        if existed:
            tail.prime()
        return tail

    async def _on_status(self, emit: Emit, tail: TranscriptTail | None, status: str | None,
                         deadline: float | None, handled: set[str | None]) -> float | None:
        """The session is idle while the transcript shows a turn still open: report it (once) when its
        final answer is on disk without the ``turn_duration`` line, or as failed if nothing ends it within
        the grace (Esc before the first streamed text writes nothing). Returns the deadline to wake at.

        Only the state is used, not a ``busy → idle`` transition: the watcher may coalesce a short busy.
        With no session file, ``quiet`` (the transcript just grew) and ``quiet?`` (it did not) stand in for
        it: an answered turn ends after :attr:`quiet_s` without a write. A held turn (background agents)
        whose session is idle is reported after :attr:`held_grace_s` unless a turn starts first."""
        if tail is None:
            return None
        if status in ("quiet", "quiet?"):
            return await self._on_quiet(emit, tail, status == "quiet", deadline)
        if status == "idle" and not tail.tracker.open and tail.tracker.held is not None:
            return await self._on_idle_held(emit, tail, deadline)
        if status != "idle" or not tail.tracker.open or tail.tracker.key in handled:
            return None
        return await self._on_idle_open(emit, tail, deadline, handled)

    async def _on_quiet(self, emit: Emit, tail: TranscriptTail, grew: bool, deadline: float | None
                        ) -> float | None:
        """No session file: an answered turn ends once the transcript stays quiet for :attr:`quiet_s`."""
        if grew or deadline is None:
            return time.monotonic() + self.quiet_s
        if time.monotonic() < deadline:
            return deadline
        end = tail.tracker.close_answered("quiet")
        if end is not None:
            await self._emit_end(emit, end, "transcript")
        return None

    async def _on_idle_held(self, emit: Emit, tail: TranscriptTail, deadline: float | None) -> float | None:
        """Idle after the background agents' work with no turn after it for :attr:`held_grace_s`: the
        held turn is the completion."""
        if deadline is None:
            return time.monotonic() + self.held_grace_s
        if time.monotonic() < deadline:
            return deadline
        held = tail.tracker.release_held()
        if held is not None:
            log.info(
                "%s: idle and no turn after the background agents of %s: that turn completes",
                self.ctx.name,
                held.key,
            )
            await self._emit_end(emit, held, "status")
        return None

    async def _on_idle_open(self, emit: Emit, tail: TranscriptTail, deadline: float | None,
                            handled: set[str | None]) -> float | None:
        """Idle while a turn is open: its final answer on disk ends it now; nothing within
        :attr:`idle_grace_s` ends it as failed (or as no turn, when it was not a prompt to the model)."""
        key = tail.tracker.key
        end = tail.tracker.pending_end()
        if end is not None:
            handled.add(key)
            await self._emit_end(emit, end, "status")
            return None
        if deadline is None:
            return time.monotonic() + self.idle_grace_s
        if time.monotonic() < deadline:
            return deadline
        handled.add(key)
        silent = tail.tracker.close_silent()
        if silent is None:
            log.info(
                "%s: idle after %s, which was not a prompt to the model; no turn to report",
                self.ctx.name,
                key,
            )
            return None
        log.info(
            "%s: idle, but the transcript shows no end of turn %s (interrupted before any text?): failed",
            self.ctx.name,
            key,
        )
        await self._emit_end(emit, silent, "status")
        return None

    def _remember(self, end: TurnEnd) -> None:
        self._ends[end.turn_id] = end
        while len(self._ends) > 32:
            self._ends.popitem(last=False)

    async def _emit_end(self, emit: Emit, end: TurnEnd, signal: str) -> None:
        self._remember(end)
        await emit(Completion(tile=self.ctx.name, turn_id=end.turn_id, outcome=end.outcome, signal=signal,
                              detail=end.reason))


def _read_session(path: Path) -> SessionFile | None:
    """The session file, or None while it is missing or half-written."""
    try:
        return read_session_file(path)
    except (OSError, ValueError):
        return None


def _unclaimed_transcripts(changed: set[Path], folder: Path, tail: TranscriptTail | None,
                           others: dict[Path, tuple[int, int]], config: Path, session_id: str | None,
                           pid: int) -> list[Path]:
    """The changed transcripts of ``folder`` other than the followed one that no other live session
    claims. Another live session's transcript is remembered in ``others`` and not looked at again while
    it lives: a neighbour's first write costs one look, not the chain (which never picks a claimed one)."""
    news = [p for p in changed if p.parent == folder and p.suffix == ".jsonl"
            and (tail is None or p != tail.path) and not _still_owned(others.get(p))]
    for p in news:
        owner = session_owner(config, p.stem) if p.stem != session_id else None
        if owner is not None and owner.pid != pid:
            others[p] = (owner.pid, owner.start_ticks)
    return [p for p in news if p not in others]


def _status(session: SessionFile | None, tail: TranscriptTail | None, changed: set[Path]) -> str | None:
    """The session's status; with no session file, ``quiet`` (the transcript just grew) or ``quiet?``
    (it did not) once the open turn has a final-looking answer."""
    status = session.status if session else None
    if status is None and tail is not None and tail.tracker.answered:
        status = "quiet" if changed else "quiet?"
    return status


def _still_owned(owner: tuple[int, int] | None) -> bool:
    """Whether the process (pid, start ticks) that owned a transcript still runs."""
    return owner is not None and proc.still_runs(*owner)
