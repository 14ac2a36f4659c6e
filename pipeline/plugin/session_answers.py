"""What an adapter that follows a session file (Gemini CLI, pi, Qwen Code) answers from it: a turn's answer
and the last one, the running turn's start, whether a prompt arrived, the session's usage, whether the pane
may be typed into, which hook record is the pane's and the turn it ended, and ``baton resolve``'s last steps.

Each agent says how its file is read (:class:`pipeline.plugin.session_follow.SessionFollowing`), how its chain
runs (``_resolution``) and what its input box holds (``input_box``); a turn's id starts with the adapter's
name (``gemini:…``), which tells a turn from the file from one seen on the screen. ``baton extract``'s
reading of one file is here too (:func:`read_whole`, :func:`last_finished`, :func:`file_completion`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import anyio

from pipeline.plugin.agents import ResolveStep, TargetState
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.session_follow import F, P, SessionFollowing, T
from pipeline.plugin.tools import sanitize, strip_ansi
from pipeline.plugin.turns import FileResolution, FileTurn, TurnMark
from pipeline.plugin.usage import SessionUsage
from pipeline.spool import HookRecord
from pipeline.system.tmux import PaneGone, ServerGone, TmuxError

__all__ = [
    "SessionAnswers", "answer_of", "file_completion", "last_finished", "norm", "read_whole", "turn_step",
]


def norm(text: str) -> str:
    """``text`` as a prompt is compared: sanitized, white space folded."""
    return " ".join(sanitize(text).split())


class SessionAnswers(SessionFollowing[P, F, T]):
    """The answers of a session-file adapter (mixed in after its follower)."""

    #: how long a hook waits for the session file to show the turn's end
    answer_wait_s: ClassVar[float] = 1.0
    #: an open turn that wrote nothing for this long, with no busy line on screen, is not trusted to run: a
    #: running turn shows its busy line (an agent killed mid-turn writes nothing, and hand-offs would wait);
    #: 0: an open turn is never trusted over the screen (an agent whose file lags its screen: Qwen Code)
    stale_busy_s: ClassVar[float] = 60.0
    #: the hook payload's key that names the session file, if the agent's hooks name it
    hook_file_key: ClassVar[str | None] = None
    #: a snapshot holds the screen even once the session file is known: an agent whose file shows a prompt
    #: only later than its screen does (pi, Cline) is seen to start a turn on the screen
    snapshot_screen: ClassVar[bool] = False

    # ---- what each agent says ----------------------------------------------------------------------------

    def input_box(self, screen: str) -> str | None:
        """What the input box holds ("" when empty); None when there is none (starting, a dialog)."""
        raise NotImplementedError

    def _usage_of(self, file: F) -> SessionUsage | None:
        raise NotImplementedError

    def _resolution(self, pane_pid: int) -> FileResolution:
        """The agent's chain from the pane to its session file (blocking: run in a worker thread)."""
        raise NotImplementedError

    # ---- answers -----------------------------------------------------------------------------------------

    def _turn(self, turn_id: str) -> T | None:
        return next((t for t in self.turns() if t.turn_id == turn_id), None)

    async def response(self, completion: Completion) -> Response | None:
        if not completion.turn_id.startswith(f"{self.name}:"):
            return await super().response(completion)  # a turn seen on the screen
        try:
            await self.refresh()
        except (PaneGone, ServerGone):
            pass
        turn = self._turn(completion.turn_id)
        if turn is None or turn.outcome is None:
            return None
        note = "" if turn.outcome == "completed" else f"turn ended: {turn.detail}"
        return Response(completion=completion, text=turn.answer or "", source="transcript",
                        cwd=self._process.cwd if self._process else None,
                        note=note or (f"in {self.file.path}" if self.file else ""))

    async def last_response(self) -> Response | None:
        try:
            await self.refresh()
        except (PaneGone, ServerGone):
            return None
        done = [t for t in self.turns() if t.outcome is not None and t.answer is not None]
        if not done:
            return None
        return Response(completion=self.completion(done[-1], "session file"), text=done[-1].answer or "",
                        source="transcript")

    async def working_since(self) -> float | None:
        """The running turn's start: its prompt's timestamp."""
        try:
            await self.refresh()
        except TmuxError:
            return None
        turns = self.turns()
        return turns[-1].started_at if turns and turns[-1].outcome is None else None

    async def usage(self) -> SessionUsage | None:
        if self.file is None:
            try:
                await self.refresh()
            except TmuxError:
                return None
        return self._usage_of(self.file) if self.file is not None else None

    async def received(self, text: str) -> bool | None:
        """After a crash mid-delivery: the session file knows whether ``text`` became a prompt."""
        try:
            await self.refresh(force=True)
        except TmuxError:
            return None
        if self.file is None:
            return await self._received_without_file(text)
        want = norm(text)
        return any(norm(t.prompt) == want for t in self.turns()[-20:])

    async def _received_without_file(self, text: str) -> bool | None:
        """No session file known: the screen tells."""
        return await super().received(text)

    # ---- hooks -------------------------------------------------------------------------------------------

    async def _mine(self, record: HookRecord) -> bool:
        """Whether a hook record is this tile's: its pane (it may name the session file), else its session."""
        try:
            pane_id = (await self.ctx.pane()).pane_id
            if record.pane:
                path = record.payload.get(self.hook_file_key) if self.hook_file_key else None
                if record.pane == pane_id and isinstance(path, str):
                    self.hook_file = path
                return record.pane == pane_id
            await self.refresh()
        except TmuxError:
            return False
        return self._is_session(record.payload.get("session_id"))

    def _is_session(self, session_id: object) -> bool:
        """Whether a hook's ``session_id`` is the followed session's."""
        return self.file is not None and session_id == self._followed_session()

    async def _ended_turn(self, pick: Callable[[list[T]], T | None], *, wait: bool = True,
                          force_unresolved: bool = False) -> T | None:
        """The turn a hook names (``pick`` of the turns), once the file shows its end (``wait``: for up to
        :attr:`answer_wait_s`, else as it is); ``force_unresolved``: look for the file while none is known."""
        deadline = time.monotonic() + self.answer_wait_s
        while True:
            try:
                await self.refresh(force=force_unresolved and self.file is None)
            except TmuxError:
                return None
            turn = pick(self.turns())
            if not wait or (turn is not None and turn.outcome is not None):
                return turn
            if time.monotonic() >= deadline:
                return None
            await anyio.sleep(0.05)

    # ---- as a target -------------------------------------------------------------------------------------

    async def _target_screen(self) -> str:
        """The screen ``target_state`` reads."""
        return strip_ansi(await self.ctx.capture())

    async def snapshot(self) -> TurnMark:
        """The session file and how many turns it holds before a prompt is typed (and the screen, while no
        file is known or :attr:`snapshot_screen`)."""
        try:
            await self.refresh(force=True)
        except TmuxError:
            pass
        screen = await self.ctx.capture() if self.file is None or self.snapshot_screen else None
        return TurnMark(source=str(self.file.path) if self.file else None, count=len(self.turns()),
                        screen=screen)

    async def target_state(self) -> TargetState:
        try:
            info = await self.ctx.pane()
            if info.dead:
                return "gone"
            if await self.refresh() is None:
                return "absent"
            screen = await self._target_screen()
        except (PaneGone, ServerGone):
            return "gone"
        if self.waiting_for(screen) is not None or self.is_busy(screen):
            return "busy"  # never type into a dialog (it would answer it) nor steer a running turn
        turns = self.turns()
        if self.stale_busy_s and turns and turns[-1].outcome is None and self.file_age() < self.stale_busy_s:
            return "busy"
        draft = self.input_box(screen)
        if draft is None:
            return "busy"  # no input box: starting, or a dialog of its own
        return "draft" if draft else "ready"

    # ---- baton resolve -----------------------------------------------------------------------------------

    async def resolve(self) -> list[ResolveStep]:
        info = await self.ctx.pane()
        steps = [self.pane_step(info)]
        waiting = await self.waiting_step()
        if waiting is not None:
            steps.append(waiting)
        res = await anyio.to_thread.run_sync(self._resolution, info.pid)
        steps += res.steps
        if res.session is not None:
            steps += await self._session_steps(res, res.session)
        return steps

    async def _session_steps(self, res: FileResolution, session: Path) -> list[ResolveStep]:
        """The steps after the chain: the session (now followed) and its turn."""
        if self.file is None or self.file.path != session:
            self.file = self._open(session)
        await anyio.to_thread.run_sync(self.file.read)
        sid = self._followed_session()
        return [ResolveStep("session", sid is not None, f"session {sid}", sid), turn_step(self.turns(), sid)]


def turn_step(turns: list[T], session_id: str | None) -> ResolveStep:
    """``baton resolve``'s last step: the turn that runs, else how the last one ended."""
    last = next((t for t in reversed(turns) if t.outcome is not None), None)
    busy = bool(turns) and turns[-1].outcome is None
    ended = f"idle; last turn {last.turn_id} {last.outcome} {last.detail}".rstrip() if last \
        else "idle, no finished turn"
    return ResolveStep("turn", True, f"busy: turn {turns[-1].turn_id}" if busy else ended,
                       {"session": session_id, "busy": busy})


# ---- baton extract ----------------------------------------------------------------------------------------

def read_whole(path: Path, open_file: Callable[[Path], F]) -> F:
    """The session file at ``path`` read to its end (a last line without its newline too); a missing or
    unreadable file raises (the caller's error, not "no turn")."""
    with open(path, "rb"):
        pass
    file = open_file(path)
    file.read(final=True)
    return file


def last_finished(path: Path, turns: list[T]) -> T:
    """The last turn of ``turns`` that ended; LookupError, in words for ``baton extract``, when none did."""
    done = [t for t in turns if t.outcome is not None]
    if not done:
        why = "the last turn is still open" if turns else "no prompt was written to it"
        raise LookupError(f"{path} holds no finished turn: {why}")
    return done[-1]


def answer_of(path: Path, turn: FileTurn) -> str:
    """The answer ``turn`` left; LookupError when it ended without one."""
    if turn.answer is None:
        raise LookupError(f"{path}: the last turn ({turn.turn_id}) ended {turn.detail}; it left no answer")
    return turn.answer


def file_completion(path: Path, turn: FileTurn) -> Completion:
    """The completion of a turn read from a file named on the command line (its tile: the file's name)."""
    return Completion(tile=Path(path).name, turn_id=turn.turn_id, outcome=turn.outcome or "completed",
                      signal="file", at=turn.ended_at or 0.0, detail=turn.detail)
