"""The adapter for the demo agent (``plugins.demo.agent``).

Like the Claude Code adapter, it reads the agent's own transcript (``<transcript_dir>/<PID>.jsonl``, found
from the pane's process tree) for completions, answers and confirmations, and falls back to the screen
when there is none (``--no-transcript``). Turns have durable ids and end times, so the engine can ask
(:meth:`DemoAdapter.finished_turns`) for the turns that finished while it was down.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import anyio

from pipeline.plugin import RegisterAgent, TmuxError
from pipeline.plugin.agents import Emit, ResolveStep, TargetState
from pipeline.plugin.dialogs import asked
from pipeline.plugin.events import Completion, Outcome, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.screen import ScreenAdapter
from pipeline.plugin.tools import AppendedLines, json_head, proc, sanitize, strip_ansi
from pipeline.plugin.turns import TurnEnd, TurnMark
from plugins.demo.agent import ASK, transcript_dir

__all__ = ["DemoAdapter"]

class DemoAdapter(ScreenAdapter):
    name = "demo"
    summary = "the built-in demo agent (baton demo)"
    file_kind = "a demo agent's transcript"
    process_names = frozenset({"baton-demo"})
    busy_markers = ("esc to interrupt",)
    input_line = re.compile(r"^demo❯\s?(.*)$")
    submit_delay_s = 0.1
    quiet_s = 0.5
    tick_s = 0.1
    #: how often the process tree is looked at again, in case the agent was restarted
    recheck_s = 2.0
    #: how often the screen is looked at for the agent's permission prompt while a turn runs
    ask_look_s = 0.5

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._agent: proc.Proc | None = None
        self._lines: AppendedLines | None = None
        self._prompts: list[str] = []
        self._answers_by_turn: dict[str, dict[str, Any]] = {}
        self._open_turn: str | None = None

    def waiting_for(self, screen: str) -> str | None:
        """The demo agent's permission prompt (:data:`plugins.demo.agent.ASK`) on its screen's last line."""
        return "permission prompt" if self.asks(screen) else None

    def asks(self, screen: str) -> str | None:
        """The prompt's line as the demo agent draws it, question and command in one (``alice asks to run
        `touch demo.txt`: allow? [y/n]``)."""
        lines = [ln for ln in strip_ansi(screen).rstrip().split("\n") if ln.strip()]
        return asked(lines[-1]) if lines and lines[-1].rstrip().endswith(ASK) else None

    def answer_keys(self, screen: str, approve: bool) -> list[str] | None:
        return (["y"] if approve else ["n"]) if self.waiting_for(screen) else None

    def draft(self, screen: str) -> str:
        """The input line and the lines below it: the demo agent draws a pasted text's further lines there,
        from the first column, and nothing else (a long paste may fill the screen below its input line)."""
        lines = screen.rstrip("\n").split("\n")
        at = next((i for i in range(len(lines) - 1, -1, -1)
                   if self.input_line is not None and self.input_line.search(lines[i])), None)
        if at is None:
            return ""
        return "\n".join([super().draft(lines[at]), *lines[at + 1:]]).strip()

    def _transcript(self, agent: proc.Proc) -> Path:
        return Path(transcript_dir()) / f"{agent.pid}.jsonl"

    async def _find_agent(self) -> proc.Proc | None:
        try:
            agent = await self.agent_process()
        except TmuxError:
            return None
        if agent is None:
            self._agent = self._lines = None
            return None
        if self._agent is None or (agent.pid, agent.start_ticks) != (
            self._agent.pid,
            self._agent.start_ticks,
        ):
            self._agent, self._lines = agent, AppendedLines(self._transcript(agent))
            self._prompts, self._answers_by_turn, self._open_turn = [], {}, None
        return agent

    def _read(self) -> list[dict[str, Any]]:
        """New transcript records; keeps the prompts seen and the answers by turn."""
        if self._lines is None:
            return []
        records = self._lines.read()
        for r in records:
            if r.get("type") == "prompt":
                self._prompts.append(str(r.get("text", "")))
                self._open_turn = str(r.get("turn_id"))
            elif r.get("type") == "answer":
                self._answers_by_turn[str(r.get("turn_id"))] = r
                if self._open_turn == r.get("turn_id"):
                    self._open_turn = None
        return records

    # ---- completion ------------------------------------------------------------------------------

    async def follow(self, emit: Emit) -> None:
        """Watch the agent's own transcript file; look at the process tree again only every
        ``recheck_s`` (an agent restarted in the pane has a new transcript), never on every write.
        What a transcript holds when it is first seen is the engine's to catch up on (finished_turns)."""
        if self.ctx.watcher is None:
            return await super().follow(emit)
        primed: tuple[int, int] | None = None  # the agent whose transcript was read up to its end
        while True:
            agent = await self._find_agent()
            if agent is None:
                await anyio.sleep(self.recheck_s)
                continue
            if _keeps_no_transcript(agent):
                return await super().follow(emit)
            with self.ctx.watcher.subscribe(self._transcript(agent)) as sub:
                if primed != (agent.pid, agent.start_ticks):
                    primed = (agent.pid, agent.start_ticks)
                    self._read()  # on disk already: history or catch-up, the engine asks for it next
                    await self.ctx.resolved()
                until = time.monotonic() + self.recheck_s
                while (left := until - time.monotonic()) > 0:
                    for r in self._read():
                        if r.get("type") == "answer":
                            await emit(self._end(r).completion(self.ctx.name, "transcript"))
                    await self._look_for_prompt()
                    await sub.wait(min(left, self.ask_look_s) if self._open_turn else left)

    async def _look_for_prompt(self) -> None:
        """While a turn runs, tell the engine whether the agent asks a person (its transcript does not
        say it: the screen does); once the turn ended, that it does not."""
        if self._open_turn is not None:
            await self.look_for_person()
        elif self.waiting_now is not None:
            self.waiting_now = None
            self.ctx.waiting(None)

    async def finished_turns(self, since: float) -> list[TurnEnd] | None:
        """The answers in the agent's transcript written at or after ``since``."""
        if await self._find_agent() is None:
            return []
        path = self._transcript(self._agent) if self._agent else None
        try:
            lines = path.read_text(encoding="utf-8").splitlines() if path else []
        except FileNotFoundError:
            return []
        ends = []
        for line in lines:
            try:
                r = json.loads(line)
            except ValueError:
                continue  # the last line, half written
            if isinstance(r, dict) and r.get("type") == "answer" and float(r.get("at") or 0) >= since:
                self._answers_by_turn.setdefault(str(r.get("turn_id")), r)
                ends.append(self._end(r))
        return ends

    @staticmethod
    def _end(r: dict[str, Any]) -> TurnEnd:
        """An answer record as the turn's end: ``"outcome": "failed"`` for an interrupted or failed turn."""
        outcome: Outcome = "failed" if r.get("outcome") == "failed" else "completed"
        return TurnEnd(turn_id=f"demo:{r['turn_id']}", outcome=outcome, text=str(r.get("text", "")),
                       ended_at=float(r.get("at") or time.time()))

    async def response(self, completion: Completion) -> Response | None:
        if not completion.turn_id.startswith("demo:"):
            return await super().response(completion)
        record = self._answers_by_turn.get(completion.turn_id.removeprefix("demo:"))
        if record is None:
            return None
        return Response(completion=completion, text=str(record.get("text", "")), source="transcript")

    @classmethod
    def recognizes_file(cls, path: Path) -> bool:
        """The demo agent's transcript: ``{at, type: prompt|answer, turn_id, text}`` records."""
        return any(r.get("type") in ("prompt", "answer") and "turn_id" in r and "at" in r
                   for r in json_head(path))

    @classmethod
    def extract_file(cls, path: Path, **options: Any) -> Response | None:
        """``baton extract --agent demo FILE``: the last answer in a demo agent's transcript (the file
        ``baton status`` and ``baton resolve`` name for a demo tile)."""
        answers = [r for r in AppendedLines(path).read(final=True) if r.get("type") == "answer"]
        if not answers:
            return None
        end = cls._end(answers[-1])
        completion = end.completion(path.name, "transcript")
        return Response(completion=completion, text=end.text, source="transcript")

    async def last_response(self) -> Response | None:
        if await self._find_agent() is None:
            return None
        self._read()
        if not self._answers_by_turn:
            return None
        turn_id, record = list(self._answers_by_turn.items())[-1]
        completion = Completion(tile=self.ctx.name, turn_id=f"demo:{turn_id}", signal="transcript",
                                at=float(record.get("at") or 0))
        return Response(completion=completion, text=str(record.get("text", "")), source="transcript")

    # ---- as a target -----------------------------------------------------------------------------

    async def target_state(self) -> TargetState:
        state = await super().target_state()
        if state in ("ready", "draft") and await self._find_agent() is not None:
            self._read()
            if self._open_turn is not None:
                return "busy"
        return state

    async def snapshot(self) -> TurnMark:
        if await self._find_agent() is None or self._agent is None:
            return await super().snapshot()
        self._read()
        return TurnMark(source=str(self._transcript(self._agent)), count=len(self._prompts))

    async def turn_started(self, before: TurnMark) -> bool:
        if before.source is None:  # no agent when the prompt was typed: the screen
            return await super().turn_started(before)
        self._read()
        return len(self._prompts) > before.count

    async def received(self, text: str) -> bool | None:
        if await self._find_agent() is None:
            return await super().received(text)
        self._read()
        return sanitize(text) in self._prompts

    async def resolve(self) -> list[ResolveStep]:
        steps = await self.find_process_steps()
        if (waiting := await self.waiting_step()) is not None:  # the permission prompt: the screen says it
            steps.append(waiting)
        if self._agent is None:
            await self._find_agent()
        if self._agent is not None:
            path = self._transcript(self._agent)
            steps.append(
                ResolveStep(
                    "transcript",
                    path.exists(),
                    f"{path}" if path.exists() else f"{path} (not yet: no prompt so far)",
                    str(path),
                )
            )
        return steps


def _keeps_no_transcript(agent: proc.Proc) -> bool:
    return "--no-transcript" in proc.cmdline(agent.pid)


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(DemoAdapter)

