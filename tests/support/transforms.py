"""Transforms under test: a typical answer, a transform made from its options, the input a route hands it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.engine.config import Settings
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.manager import Registries, load_registries, make_plugin_manager
from pipeline.plugin.transforms import Transform, TransformInput
from plugins.transforms.llm import LLMSettings
from tests.fakes.anthropic_api import FakeAnthropicAPI, serving

__all__ = ["ANSWER", "anthropic_api", "handoff", "make", "registries"]

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


@pytest.fixture
def anthropic_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropicAPI]:
    """The fake Messages API on 127.0.0.1, with ``ANTHROPIC_BASE_URL`` and a key pointing at it."""
    with serving(monkeypatch) as api:
        yield api


@pytest.fixture(scope="module")
def registries() -> Registries:
    """The built-in plugins only (an installed third-party transform would change what the tests see)."""
    return load_registries(make_plugin_manager(load_external=False))

