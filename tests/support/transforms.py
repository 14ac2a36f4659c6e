"""Transforms under test: a typical answer, a transform made from its options, the input a route hands it."""

from __future__ import annotations

from typing import Any

from pipeline.engine.config import Settings
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.transforms import Transform, TransformInput
from plugins.transforms.llm import LLMSettings

__all__ = ["ANSWER", "handoff", "make"]

ANSWER = ("I moved token checks into src/auth/tokens.py and added `refresh_token()`.\n\n"
          "```python\ndef refresh_token(t: Token) -> Token:\n    return t.renew()\n```\n\nReady for review.")


def make(registries, kind: str, settings: Settings | None = None, **options: Any) -> Transform:
    transform = registries.transforms.get(kind).from_config(options)
    transform.configure(
        settings or Settings(llm=LLMSettings(model="claude-test", max_tokens=333, timeout_s=10))
    )
    return transform


def handoff(text: str = ANSWER, outcome: str = "completed") -> TransformInput:
    async def no_terminal() -> str:
        return ""

    completion = Completion(tile="coder", turn_id="turn-7", outcome=outcome)  # type: ignore[arg-type]
    return TransformInput(
        response=Response(completion=completion, text=text, source="transcript", cwd="/src/app"),
        route="review", source="coder", target="reviewer", source_agent="claude", target_agent="codex",
        source_description="writes the code", target_description="reviews each change", cwd="/src/app",
        terminal_text=no_terminal)
