"""Claude Code, read from its own files: the resolution chain, the transcript answer, three completion
signals.

A turn is reported by whichever comes first of: the transcript's end-of-turn lines, the session file's
``busy → idle`` (``waiting`` on a permission prompt is not an end), and the Stop hook installed by
``baton hooks install --claude``. All three name the turn ``claude:<sessionId>:<promptId>`` (see
:mod:`plugins.claude_code.turns`), so the detector keeps one. The answer is the transcript's; the hook's
``last_assistant_message`` rides along in the Completion as a fallback; the screen is the last resort,
and so is following the screen when the process shows no session file and no transcript. Every fallback
is logged with its reason.

Background agents (2.1.332): a turn that ends with subagents still running is held by the reader (see
:mod:`plugins.claude_code.turns`) and reported as no completion — so it fires no route, not even ``on: any``,
and uses no hop; the Stop hook it fires (``background_tasks`` running) is dropped. The tile's completion
is the later turn that ends with none running, or, if the session goes idle and no such turn comes within
``held_grace_s``, the held turn itself.
"""

from __future__ import annotations

import copy
import logging
import shlex
import time
from pathlib import Path
from typing import Any, ClassVar

import anyio

from pipeline.plugin import PaneGone, PaneInfo, RegisterAgent, ServerGone, TmuxError, TurnMark
from pipeline.plugin import turns as Turns
from pipeline.plugin.agents import InputHolds, ResolveStep, TargetState
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.tools import json_head
from pipeline.plugin.usage import SessionUsage
from plugins.claude_code.files import UUID, config_dir, read_session_file, transcript_inside
from plugins.claude_code.follow import FileFollowing
from plugins.claude_code.hooks import install_stop_hook
from plugins.claude_code.paste import normalized
from plugins.claude_code.reader import (
    TailScan,
    find_turn,
    last_finished_turn,
    latest_key,
    latest_turn,
    nothing_finished,
    recent_prompts,
    running_turn_start,
    scan_back,
)
from plugins.claude_code.resolve import PROCESS_NAMES, Resolution, resolve_pid
from plugins.claude_code.screen import (
    BUSY_MARKERS,
    dialog,
    dialog_question,
    input_box,
    paste_placeholder,
    permission_answer,
    screen_answer,
)
from plugins.claude_code.turns import TurnEnd, turn_id
from plugins.claude_code.usage import TranscriptUsage

__all__ = ["ClaudeCodeAdapter"]

log = logging.getLogger("batonpass")

BUSY_STATUSES = frozenset({"busy", "waiting", "shell"})


class ClaudeCodeAdapter(FileFollowing):
    name = "claude"
    summary = "Claude Code: transcript answers; completion from session status, transcript and Stop hook"
    file_kind = "a Claude Code transcript"
    process_names = PROCESS_NAMES
    #: an Enter read with the paste is part of it (docs/agents.md, Claude Code: typing): the dispatcher
    #: presses Enter once the input shows the paste (measured on 2.1.332: 15–50 ms after it, every hand-off
    #: whole, docs/performance.md); this is the most it waits for that
    submit_delay_s = 0.3
    busy_markers = BUSY_MARKERS
    #: how long response() waits for the transcript to show a turn first reported by the hook
    answer_wait_s: ClassVar[float] = 3.0

    # ---- the chain -------------------------------------------------------------------------------

    async def _resolve(self) -> Resolution:
        info = await self.ctx.pane()
        return self._chain(info)

    def _chain(self, info: PaneInfo) -> Resolution:
        self._resolution, self._resolved_pane = resolve_pid(info.pid, info.pane_id), info.pane_id
        return self._resolution

    def _current(self, info: PaneInfo) -> Resolution:
        """The chain's result for the pane as it is now, without running the chain again while nothing it
        rests on changed: the process it found still lives (same start time) in the same pane and its
        session file still names the same session. Only that file is read again (the status is news);
        a new transcript of the same session is the follower's to notice (it updates the resolution)."""
        res = self._resolution
        if res is None or res.process is None or res.session is None or self._resolved_pane != info.pane_id:
            return self._chain(info)
        if not res.process.running():
            return self._chain(info)
        try:
            session = read_session_file(res.session.path)
        except (OSError, ValueError):
            return self._chain(info)
        if session.session_id != res.session.session_id:
            return self._chain(info)
        fresh = copy.copy(res)
        fresh.session = session
        return fresh

    async def resolve(self) -> list[ResolveStep]:
        info = await self.ctx.pane()
        res = await self._resolve()
        steps = [self.pane_step(info)] + res.steps
        activity = await anyio.to_thread.run_sync(self._activity, res)
        if activity:
            steps.append(ResolveStep("activity", True, activity, activity))
        elif res.process is not None and res.session is None:  # no session file to say it: the screen
            waiting = await self.waiting_step()
            if waiting is not None:
                steps.append(waiting)
        if res.transcript is None:
            steps.append(
                ResolveStep(
                    "answer",
                    False,
                    "answers will come from the screen (terminal fallback): the "
                    f"chain stopped at {res.stopped_at}",
                )
            )
            return steps
        end = await anyio.to_thread.run_sync(last_finished_turn, res.transcript)
        detail = (f"last finished turn {end.turn_id}: {len(end.text)} chars: {end.text[:60]!r}" if end else
                  "no finished turn in the transcript yet")
        steps.append(ResolveStep("answer", True, f"{detail} (rule: {res.rule})",
                                 {"rule": res.rule, "turn_id": end.turn_id if end else None}))
        return steps

    @staticmethod
    def _activity(res: Resolution) -> str:
        """What a busy agent is doing, in ``baton status``'s words: ``working``, ``working: 1 background
        agent`` (a held turn, session still busy) or ``waiting (<what for>)`` — the session file says when a
        person is needed (2.1.332 fires no hook for its approval prompts). "" when idle: then the target
        state (ready, draft) says more."""
        session = res.session
        if session is None or session.status not in ("busy", "waiting"):
            return ""
        if session.status == "waiting":
            return f"waiting ({session.waiting_for or 'for a person'})"
        try:
            tracker = latest_turn(res.transcript) if res.transcript else None
        except OSError:
            tracker = None
        n = tracker.background if tracker is not None and tracker.state == "background" else 0
        return f"working: {n} background agent{'s' if n != 1 else ''}" if n else "working"

    async def finished_turns(self, since: float) -> list[Turns.TurnEnd] | None:
        """The turns of the pane's current transcript that ended at or after ``since`` (read back from its
        end only as far as ``since``)."""
        try:
            res = await self._resolve()
        except (PaneGone, ServerGone):
            return []
        if res.transcript is None:
            return []

        def reaches(scan: TailScan) -> bool:
            return any(e.whole and e.ended_at < since for e in scan.ends)

        try:
            scan = await anyio.to_thread.run_sync(scan_back, res.transcript, reaches)
        except FileNotFoundError:
            return []
        ends = [e for e in scan.ends if e.ended_at >= since and (e.whole or scan.from_start)]
        for end in ends:
            self._remember(end)
        return [Turns.TurnEnd(turn_id=e.turn_id, outcome=e.outcome, text=e.text, ended_at=e.ended_at,
                              session_id=e.session_id, cwd=e.cwd, detail=e.reason) for e in ends]

    async def hook_completion(self, record: Any) -> Completion | None:
        payload = record.payload
        if payload.get("hook_event_name", "Stop") != "Stop":
            return None
        tasks = payload.get("background_tasks")
        if isinstance(tasks, list) and any(
            isinstance(t, dict) and t.get("status") == "running" for t in tasks
        ):
            return None  # 2.1.332: the turn ended with background agents running — not the end of the work
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
        return Response(
            completion=completion, text=screen.text if screen else "", source="terminal", note=why
        )

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
        try:
            return await anyio.to_thread.run_sync(self.extract_file, res.transcript)
        except LookupError:
            return None

    @classmethod
    def recognizes_file(cls, path: Path) -> bool:
        """A transcript's records name their session (``sessionId``) beside their ``type``, from the first
        ones on. Gemini CLI's session file names its session in a header without a ``type``, Copilot CLI's
        events inside ``data``: neither is a transcript; a Qwen Code session file's records have both, with
        a ``provenance`` Claude Code never writes."""
        head = json_head(path)
        qwen = any("provenance" in r for r in head)
        return not qwen and any(isinstance(r.get("sessionId"), str) and isinstance(r.get("type"), str)
                                for r in head)

    @classmethod
    def extract_file(cls, path: Path, **options: Any) -> Response | None:
        """The last finished turn's answer; raises LookupError saying why there is none (no main chain,
        the last turn still open or waiting for background agents, the last turn failed)."""
        end = last_finished_turn(path)
        if end is None:
            raise LookupError(nothing_finished(path))
        completion = Completion(
            tile=Path(path).name, turn_id=end.turn_id, signal="transcript", detail=end.reason
        )
        return Response(completion=completion, text=end.text, source="transcript", cwd=end.cwd)

    _usage: TranscriptUsage | None = None

    async def usage(self) -> SessionUsage | None:
        res = self._resolution or await self._resolve()
        if res.transcript is None:
            return None
        if self._usage is None or self._usage.transcript != res.transcript:
            self._usage = TranscriptUsage(res.transcript)
        return await anyio.to_thread.run_sync(self._usage.read, abandon_on_cancel=True)

    #: (transcript, session file's statusUpdatedAt) -> the running turn's start, read once per status change
    _since: tuple[tuple[Path | None, int | None], float | None] | None = None

    async def working_since(self) -> float | None:
        """While the session file says ``busy`` or ``waiting``: the running turn's prompt line's timestamp
        in the transcript, else the session file's ``statusUpdatedAt`` (ms). Read again only when the
        status changed (a long turn's transcript is not scanned back on every look)."""
        info = await self.live_pane()
        if info is None:
            return None
        res = self._current(info)
        session = res.session
        if session is None or session.status not in BUSY_STATUSES:
            return None
        key = (res.transcript, session.status_updated_at)
        if self._since is not None and self._since[0] == key:
            return self._since[1]
        started = None
        if res.transcript is not None:
            try:
                started = await anyio.to_thread.run_sync(running_turn_start, res.transcript)
            except OSError:
                started = None
        if started is None and session.status_updated_at is not None:
            started = session.status_updated_at / 1000
        if started is not None and started > time.time() + 5:
            started = None  # a clock from the future (or not in ms): the board's own first sight is better
        self._since = (key, started)
        return started

    # ---- as a target -----------------------------------------------------------------------------

    async def target_state(self) -> TargetState:
        info = await self.live_pane()
        if info is None:
            return "gone"
        res = self._current(info)
        if res.process is None:
            return "absent"
        if res.session is None or res.session.status not in (BUSY_STATUSES | {"idle"}):
            return await super().target_state()
        if res.session.status in BUSY_STATUSES:
            return "busy"
        try:
            screen = await self.ctx.capture()
        except TmuxError:
            return "gone"
        return "draft" if input_box(screen) else "ready"  # a dialog says so in the session file: busy

    async def input_holds(self, text: str) -> InputHolds | None:
        """What the input box holds; None when no box is in sight."""
        try:
            box = input_box(await self.ctx.capture())
        except TmuxError:
            return None
        if box is None:
            return None
        return "empty" if not box else "prompt" if self.shows_paste(box, text) else "other"

    def draft(self, screen: str) -> str:
        return input_box(screen) or ""

    def shows_paste(self, draft: str, text: str) -> bool:
        return paste_placeholder(draft, text) or super().shows_paste(draft, text)

    def answer_keys(self, screen: str, approve: bool) -> list[str] | None:
        return permission_answer(screen, approve)

    def waiting_for(self, screen: str) -> str | None:
        """A permission prompt or dialog on the screen: what tells it when no session file does (the
        screen fallback, versions before the session file)."""
        return dialog(screen)

    def asks(self, screen: str) -> str | None:
        return dialog_question(screen)

    async def received(self, text: str) -> bool | None:
        """Whether one of the last prompts in the session's transcript is ``text`` (its paste wrapper
        removed: docs/agents.md, Claude Code); False when the session file names a session whose transcript
        does not exist yet (Claude Code creates it with the first prompt); None when nothing can tell."""
        res = await self._resolve()
        if res.transcript is None:
            return False if res.session is not None else None
        try:
            prompts = await anyio.to_thread.run_sync(recent_prompts, res.transcript)
        except OSError:
            return None
        want = normalized(text)
        return any(normalized(p) == want for p in prompts)

    async def snapshot(self) -> TurnMark:
        info = await self.ctx.pane()
        res = self._current(info)
        key = await anyio.to_thread.run_sync(latest_key, res.transcript)
        screen = await self.ctx.capture() if res.session is None else None
        return TurnMark(
            changed_at=res.session.status_updated_at if res.session else None,
            source=str(res.transcript) if res.transcript is not None else None,
            key=key,
            screen=screen,
        )

    async def turn_started(self, before: TurnMark) -> bool:
        info = await self.ctx.pane()
        res = self._current(info)
        if res.session is not None and res.session.status_updated_at != before.changed_at \
                and res.session.status in BUSY_STATUSES:
            return True
        if res.transcript is not None:
            if str(res.transcript) != before.source or \
                    await anyio.to_thread.run_sync(latest_key, res.transcript) != before.key:
                return True
        if before.screen is not None:
            return await super().turn_started(before)
        return False

    # ---- hooks -----------------------------------------------------------------------------------

    @classmethod
    def install_hooks(cls, hook_command: list[str]) -> str:
        return install_stop_hook(config_dir() / "settings.json", shlex.join(hook_command))


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(ClaudeCodeAdapter)
