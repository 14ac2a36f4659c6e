"""Claude Code, read from its own files: the resolution chain, the transcript answer, three completion signals.

A turn is reported by whichever comes first of: the transcript's end-of-turn lines, the session file's
``busy → idle`` (``waiting`` on a permission prompt is not an end), and the Stop hook installed by
``baton hooks install --claude``. All three name the turn ``claude:<sessionId>:<promptId>`` (see
:mod:`plugins.claude_code.reader`), so the detector keeps one. The answer is the transcript's; the hook's
``last_assistant_message`` rides along in the Completion as a fallback; the screen is the last resort,
and so is following the screen when the process shows no session file and no transcript. Every fallback
is logged with its reason.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, ClassVar

import anyio

from pipeline.engine.watch import Subscription
from pipeline.plugin.agents import Emit, ResolveStep, TargetState
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.system import proc
from pipeline.system.tmux import PaneGone, ServerGone, TmuxError
from plugins.claude_code.hooks import install_stop_hook
from plugins.claude_code.reader import (
    TranscriptTail,
    TurnEnd,
    find_turn,
    last_finished_turn,
    latest_key,
    latest_turn,
    turn_id,
)
from plugins.claude_code.resolve import (
    PROCESS_NAMES,
    UUID,
    Resolution,
    config_dir,
    project_folder_name,
    read_session_file,
    resolve_pid,
    resolve_process,
    transcript_inside,
)
from plugins.claude_code.screen import BUSY_MARKERS, input_box, screen_answer
from plugins.terminal.adapter import TerminalAdapter

__all__ = ["ClaudeCodeAdapter"]

log = logging.getLogger("batonpass")

BUSY_STATUSES = frozenset({"busy", "waiting", "shell"})


async def wait_any(subs: list[Subscription], timeout: float) -> set[Path]:
    """Wait for a hint on any of ``subs`` (or ``timeout``); the paths changed on all of them."""
    changed: set[Path] = set()
    async with anyio.create_task_group() as tg:

        async def one(sub: Subscription) -> None:
            changed.update(await sub.wait(timeout))
            tg.cancel_scope.cancel()

        for sub in subs:
            tg.start_soon(one, sub)
    for sub in subs:
        changed |= sub.changed
        sub.changed = set()
    return changed


class ClaudeCodeAdapter(TerminalAdapter):
    name = "claude"
    summary = "Claude Code: transcript answers; completion from session status, transcript and Stop hook"
    process_names = PROCESS_NAMES
    # SPEC §5: Claude Code needs >= 150 ms between paste and Enter
    submit_delay_s = 0.3
    busy_markers = BUSY_MARKERS
    #: how long the session file may be missing after start before the screen is followed instead
    startup_grace_s: ClassVar[float] = 10.0
    #: after the session turns idle, how long the transcript may take to show how the turn ended (usually
    #: ~0.2 s; generous because calling a turn that did end "failed" would lose its hand-off, while a turn
    #: Esc'd before any text — the only one that never shows an end — has nothing to hand off anyway)
    idle_grace_s: ClassVar[float] = 5.0
    #: how long response() waits for the transcript to show a turn first reported by the hook
    answer_wait_s: ClassVar[float] = 3.0
    #: how often a follower checks that its process still lives (processes send no file events)
    liveness_s: ClassVar[float] = 2.0
    #: when the chain changes (a new session, a new process), turns that ended this long before are news
    replay_s: ClassVar[float] = 10.0

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._ends: OrderedDict[str, TurnEnd] = OrderedDict()
        self._resolution: Resolution | None = None

    # ---- the chain -------------------------------------------------------------------------------

    async def _resolve(self) -> Resolution:
        info = await self.ctx.pane()
        self._resolution = resolve_pid(info.pid)
        return self._resolution

    async def resolve(self) -> list[ResolveStep]:
        info = await self.ctx.pane()
        res = await self._resolve()
        steps = [ResolveStep("pane", True, f"{self.ctx.tile.pane} -> {info.pane_id} ({info.address}), pid {info.pid}",
                             {"pane_id": info.pane_id, "pid": info.pid})] + res.steps
        if res.transcript is None:
            steps.append(ResolveStep("answer", False, "answers will come from the screen (terminal fallback): the "
                                     f"chain stopped at {res.stopped_at}"))
            return steps
        end = await anyio.to_thread.run_sync(last_finished_turn, res.transcript)
        detail = (f"last finished turn {end.turn_id}: {len(end.text)} chars: {end.text[:60]!r}" if end else
                  "no finished turn in the transcript yet")
        steps.append(ResolveStep("answer", True, f"{detail} (rule: {res.rule})",
                                 {"rule": res.rule, "turn_id": end.turn_id if end else None}))
        return steps

    # ---- completion ------------------------------------------------------------------------------

    async def follow(self, emit: Emit) -> None:
        watcher = self.ctx.watcher
        if watcher is None:  # outside the daemon: nothing shared to watch files with
            await super().follow(emit)
            return
        said = ""
        since: float | None = None  # after the first chain, turns that ended since then are news
        while True:
            try:
                res = await self._resolve()
            except (PaneGone, ServerGone):
                await anyio.sleep(1.0)
                continue
            why = self._why_not_files(res)
            if why != said and why:
                log.info("%s: %s", self.ctx.name, why)
            said = why
            if res.process is None:  # a process starting sends no file event: look again in a while
                await anyio.sleep(self.liveness_s)
                continue
            if why.startswith("waiting") and res.config is not None:
                with watcher.subscribe(res.config / "sessions") as sub:
                    await sub.wait(self.liveness_s)
                continue
            if why:
                await self._follow_screen_until_files(emit)
                continue
            await self._follow_files(emit, res, since)
            since = time.time() - self.replay_s

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

    async def _follow_files(self, emit: Emit, res: Resolution, since: float | None) -> None:
        """Follow one process's session file and transcript; return when the chain must be run again.
        Turns that ended in the transcript after ``since`` (a new session after /clear, a new process in
        the pane) are reported too; the first time, what is on disk is history."""
        assert self.ctx.watcher is not None and res.process is not None and res.config is not None
        pid, start_ticks = res.process.pid, res.process.start_ticks
        session_path = res.config / "sessions" / f"{pid}.json"
        folder = res.project_dir or res.config / "projects" / project_folder_name(res.cwd or "/")
        tail = self._tail_for(res.transcript, existed=True)
        for end in tail.history if tail and since is not None else []:
            if end.ended_at >= since:
                await self._emit_end(emit, end, "transcript")
        session_id = res.session.session_id if res.session else None
        idle_deadline: float | None = None
        # a turn left open while the session is idle already is history, not news
        handled: set[str | None] = {None, tail.tracker.key if tail and tail.tracker.open else None}
        log.info("%s: following %s (rule %s) and %s", self.ctx.name, res.transcript or f"{folder}/ (no transcript yet)",
                 res.rule or "-", session_path.name)
        with self.ctx.watcher.subscribe(session_path.parent) as s1, self.ctx.watcher.subscribe(folder) as s2:
            while True:
                timeout = self.liveness_s if idle_deadline is None else max(idle_deadline - time.monotonic(), 0.0)
                changed = await wait_any([s1, s2], timeout)
                live = proc.read_proc(pid)
                if live is None or live.start_ticks != start_ticks:
                    log.info("%s: Claude Code pid %d exited", self.ctx.name, pid)
                    return
                try:
                    session = read_session_file(session_path)
                except (OSError, ValueError):
                    session = None
                if session is not None and session.session_id != session_id:
                    return  # a new session (or the file appeared): run the chain again
                if tail is None or any(p.parent == folder and p != tail.path and p.suffix == ".jsonl" for p in changed):
                    fresh = resolve_process(live)
                    if fresh.transcript is not None and (tail is None or fresh.transcript != tail.path):
                        log.info("%s: transcript is now %s (rule %s)", self.ctx.name, fresh.transcript, fresh.rule)
                        tail = self._tail_for(fresh.transcript, existed=False)
                        self._resolution = fresh
                for end in tail.read_new() if tail else []:
                    await self._emit_end(emit, end, "transcript")
                status = session.status if session else None
                idle_deadline = await self._on_status(emit, tail, status, idle_deadline, handled)

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

        Only the state is used, not a ``busy → idle`` transition: the watcher may coalesce a short busy."""
        if status != "idle" or tail is None or not tail.tracker.open or tail.tracker.key in handled:
            return None
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
            log.info("%s: idle after %s, which was not a prompt to the model; no turn to report", self.ctx.name, key)
            return None
        log.info("%s: idle, but the transcript shows no end of turn %s (interrupted before any text?): failed",
                 self.ctx.name, key)
        await self._emit_end(emit, silent, "status")
        return None

    async def _emit_end(self, emit: Emit, end: TurnEnd, signal: str) -> None:
        self._ends[end.turn_id] = end
        while len(self._ends) > 32:
            self._ends.popitem(last=False)
        await emit(Completion(tile=self.ctx.name, turn_id=end.turn_id, outcome=end.outcome, signal=signal,
                              detail=end.reason))

    async def hook_completion(self, record: Any) -> Completion | None:
        payload = record.payload
        if payload.get("hook_event_name", "Stop") != "Stop":
            return None
        session_id = payload.get("session_id")
        if not isinstance(session_id, str) or not UUID.match(session_id):
            return None
        try:
            pane_id = (await self.ctx.pane()).pane_id
        except TmuxError:
            return None
        if record.pane:
            if record.pane != pane_id:
                return None
        else:
            res = self._resolution or await self._resolve()
            if res.session_id != session_id.lower():
                return None
        key = payload.get("prompt_id")
        if not isinstance(key, str) or not key:
            key = await anyio.to_thread.run_sync(self._current_key, payload.get("transcript_path"))
        text = payload.get("last_assistant_message")
        return Completion(tile=self.ctx.name, turn_id=turn_id(session_id.lower(), key), signal="hook",
                          text=text if isinstance(text, str) else None, detail="Stop hook")

    def _current_key(self, path: Any) -> str | None:
        """The running turn's key from the transcript (for a Stop hook without ``prompt_id``)."""
        res = self._resolution
        config = res.config if res and res.config else config_dir()
        safe = transcript_inside(path, config) if isinstance(path, str) else None
        target = safe or (res.transcript if res else None)
        try:
            return latest_turn(target).key if target else None
        except OSError:
            return None

    # ---- the answer ------------------------------------------------------------------------------

    async def response(self, completion: Completion) -> Response | None:
        if not completion.turn_id.startswith("claude:"):
            return await super().response(completion)  # a turn seen on the screen
        end = self._ends.get(completion.turn_id) or await self._await_end(completion.turn_id)
        if end is not None:
            return Response(completion=completion, text=end.text, source="transcript", cwd=end.cwd,
                            note="" if end.outcome == "completed" else f"turn ended: {end.reason}")
        why = f"the transcript shows no end of turn {completion.turn_id} after {self.answer_wait_s:.0f}s"
        if completion.text is not None:
            log.info("%s: answer from the Stop hook: %s", self.ctx.name, why)
            return None  # the extractor takes the hook's text and says so
        log.info("%s: answer from the terminal: %s", self.ctx.name, why)
        screen = await super().response(completion)
        return Response(completion=completion, text=screen.text if screen else "", source="terminal", note=why)

    async def _await_end(self, tid: str) -> TurnEnd | None:
        _, session_id, key = tid.split(":", 2)
        res = self._resolution or await self._resolve()
        if res.transcript is None:
            return None
        path = res.transcript.with_name(f"{session_id}.jsonl") if UUID.match(session_id) else res.transcript
        if not path.exists():
            path = res.transcript
        deadline = time.monotonic() + self.answer_wait_s
        sub = self.ctx.watcher.subscribe(path) if self.ctx.watcher else None
        try:
            while True:
                end, started = await anyio.to_thread.run_sync(find_turn, path, key)
                if end is not None or not started or time.monotonic() >= deadline:
                    return end
                if sub is not None:
                    await sub.wait(min(0.5, max(deadline - time.monotonic(), 0.0)))
                else:
                    await anyio.sleep(0.05)
        finally:
            if sub is not None:
                sub.close()

    async def _turn_text(self, start: int) -> str:
        return screen_answer(await self.ctx.capture_from(start))

    async def last_response(self) -> Response | None:
        res = await self._resolve()
        if res.transcript is None:
            return None
        return await anyio.to_thread.run_sync(self.extract_file, res.transcript)

    @classmethod
    def extract_file(cls, path: Path) -> Response | None:
        end = last_finished_turn(path)
        if end is None:
            return None
        completion = Completion(tile=Path(path).name, turn_id=end.turn_id, signal="transcript", detail=end.reason)
        return Response(completion=completion, text=end.text, source="transcript", cwd=end.cwd)

    # ---- as a target -----------------------------------------------------------------------------

    async def target_state(self) -> TargetState:
        info = await self.live_pane()
        if info is None:
            return "gone"
        res = resolve_pid(info.pid)
        if res.process is None:
            return "absent"
        if res.session is None or res.session.status not in (BUSY_STATUSES | {"idle"}):
            return await super().target_state()
        if res.session.status in BUSY_STATUSES:
            return "busy"
        try:
            screen = await self.ctx.tmux.capture(info.pane_id)
        except TmuxError:
            return "gone"
        return "draft" if self.draft(screen) else "ready"

    def draft(self, screen: str) -> str:
        return input_box(screen) or ""

    async def snapshot(self) -> Any:
        info = await self.ctx.pane()
        res = resolve_pid(info.pid)
        key = await anyio.to_thread.run_sync(latest_key, res.transcript)
        screen = await self.ctx.tmux.capture(info.pane_id) if res.session is None else None
        return {"status_at": res.session.status_updated_at if res.session else None, "transcript": res.transcript,
                "key": key, "screen": screen}

    async def turn_started(self, before: Any) -> bool:
        if not isinstance(before, dict):
            return await super().turn_started(before)
        info = await self.ctx.pane()
        res = resolve_pid(info.pid)
        if res.session is not None and res.session.status_updated_at != before["status_at"] \
                and res.session.status in BUSY_STATUSES:
            return True
        if res.transcript is not None:
            if res.transcript != before["transcript"] or \
                    await anyio.to_thread.run_sync(latest_key, res.transcript) != before["key"]:
                return True
        if before["screen"] is not None:
            return await super().turn_started(before["screen"])
        return False

    # ---- hooks -----------------------------------------------------------------------------------

    @classmethod
    def install_hooks(cls, hook_command: list[str]) -> str:
        return install_stop_hook(config_dir() / "settings.json", shlex.join(hook_command))


@hookimpl
def register_agents(register) -> None:
    register(ClaudeCodeAdapter)
