"""What ``baton status`` takes from an adapter's resolve steps (pipeline/views/tile_status.py): every
adapter's session id lands in the ``session_id`` column, whatever key its step uses."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.plugin.turns import ResolveStep
from pipeline.views.tile_status import _take_steps


def row() -> dict[str, Any]:
    return {"session_id": None, "session": None, "transcript": None, "state": None}


@pytest.mark.parametrize(("steps", "session_id"), [
    # a session-file adapter (Gemini CLI, Qwen Code, pi, Cline): its session step, then its turn step
    ([ResolveStep("session file", True, "/s/1.json", {"path": "/s/1.json"}),
      ResolveStep("session", True, "session 1796_ab", "1796_ab"),
      ResolveStep("turn", True, "turn 3 ended", {"session": "1796_ab", "busy": False})], "1796_ab"),
    # Claude Code / OpenCode / Codex name it in a dict
    ([ResolveStep("transcript", True, "/t.jsonl", {"path": "/t.jsonl", "sessionId": "c-1"})], "c-1"),
    ([ResolveStep("rollout", True, "/r.jsonl", {"path": "/r.jsonl", "thread": "th-9"})], "th-9"),
    # no session yet: nothing made up
    ([ResolveStep("session", False, "no session yet", None),
      ResolveStep("turn", True, "no turn yet", {"session": None, "busy": False})], None),
])
def test_the_session_id_column_takes_each_adapters_session(steps: list[ResolveStep],
                                                           session_id: str | None) -> None:
    got = row()
    _take_steps(got, steps)
    assert got["session_id"] == session_id
