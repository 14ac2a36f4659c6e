"""The shapes every agent adapter shares: a finished turn read from the agent's files, and the chain that
found those files. Each adapter reads its own formats; these are what it hands the engine and ``baton``."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from pipeline.plugin.events import Completion, Outcome

__all__ = ["FileResolution", "FileTurn", "Resolution", "ResolveStep", "TurnEnd", "TurnMark"]


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """A turn that ended, as the agent's own files record it.

    ``turn_id`` is stable (the same from every signal of that agent), ``ended_at`` is when the turn's last
    record was written (epoch seconds), ``text`` is its clean answer ("" when it failed before answering) and
    ``detail`` says how it ended or why it failed, in words for ``baton history``."""

    turn_id: str
    outcome: Outcome
    text: str
    ended_at: float
    session_id: str | None = None
    cwd: str | None = None
    detail: str = ""

    def completion(self, tile: str, signal: str) -> Completion:
        """The detector's record of this turn for ``tile``, seen through ``signal``."""
        return Completion(tile=tile, turn_id=self.turn_id, outcome=self.outcome, signal=signal,
                          at=self.ended_at, text=self.text, detail=self.detail)


@dataclass
class ResolveStep:
    """One step of a resolution chain, for ``baton resolve``: what was looked at and what was found."""

    step: str
    ok: bool
    detail: str
    value: object = None


@dataclass
class Resolution:
    """Where an adapter's chain from pane to files got to. Adapters subclass it with what they found
    (a session file, a transcript, a rollout); ``rule`` says which rule decided."""

    steps: list[ResolveStep] = field(default_factory=list)
    rule: str = ""

    def add(self, step: str, ok: bool, detail: str, value: object = None) -> None:
        self.steps.append(ResolveStep(step, ok, detail, value))

    @property
    def stopped_at(self) -> str | None:
        """The first step that failed, if any."""
        return next((s.step for s in self.steps if not s.ok), None)


@dataclass
class FileResolution(Resolution):
    """A chain that ends at one session file (Gemini CLI, pi, Qwen Code): ``session``, once a rule decided."""

    session: Path | None = None

    def decide(self, rule: str, path: Path, detail: str) -> Self:
        """``rule`` names ``path`` the pane's session file (the last steps ``baton resolve`` shows)."""
        self.session, self.rule = path, rule
        self.add(rule, True, f"decided: {detail}", str(path))
        self.add("transcript", True, f"{path} (rule: {rule})", str(path))  # the session file
        return self


@dataclass
class FileTurn:
    """One user turn of a session file, as far as the file tells (Gemini CLI, pi, Qwen Code: each agent's
    reader adds what else it counts)."""

    turn_id: str
    prompt: str
    started_at: float
    #: None while open; ``completed`` or ``failed`` once the file shows an end
    outcome: Outcome | None = None
    #: an end that may not be the last word (a final-looking answer, an error a retry may follow): the
    #: hook or the screen confirms it
    provisional: bool = False
    answer: str | None = None
    ended_at: float | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class TurnMark:
    """What an adapter noted just before a prompt was submitted (:meth:`AgentAdapter.snapshot`), for
    :meth:`AgentAdapter.turn_started` to compare with. One type for every adapter; each fills what it reads.

    ``source``: the file the agent was writing (a transcript, a rollout); ``count``: how many prompts or
    turn starts it held; ``key``: its latest prompt's key; ``keys``: the latest user message per session (a
    store of several sessions); ``changed_at``: when the agent last reported a status; ``screen``: the pane's
    text (screen adapters, and the fallback of the others); ``cursor``: the pane's cursor line; ``at``: when
    the mark was taken (epoch seconds)."""

    source: str | None = None
    count: int = 0
    key: str | None = None
    keys: Mapping[str, str | None] | None = None
    changed_at: float | None = None
    screen: str | None = None
    cursor: int | None = None
    at: float = field(default_factory=time.time)
