"""The real agent CLIs for ``bench_feel.py``: how each starts offline against its fake model API on 127.0.0.1.

Each entry makes the agent's isolated home (the tests' helpers: tests/support/*.py), starts its fake API
(tests/fakes/*.py) answering every prompt with a short line, and says what to type in a clean shell to start
the CLI. The CLIs come from the tests' npm cache (tests/fakes/npm_agents.py; the pins of
tests/agent_versions.py). Every request a fake API receives is timestamped on arrival (``arrivals``).
"""

from __future__ import annotations

import contextlib
import json
import shlex
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.agent_versions import resolve
from tests.fakes.npm_agents import install, node_22, node_22_dir

__all__ = ["AGENTS", "Fake", "Home", "fake_api", "make_home"]

#: what every target answers (short: its turn ends quickly)
TARGET_ANSWER = "Noted."


@dataclass
class Home:
    """An agent's home: the clean shell its pane runs, where, and the command typed there; ``end`` ends what
    the agent started that outlives its pane and names no file of the run (Cline's hub daemon), called once
    the tmux server is gone."""

    env: dict[str, str]
    cwd: Path
    command: str
    end: Callable[[], None] = field(default=lambda: None)

    def shell(self) -> str:
        pairs = " ".join(shlex.quote(f"{k}={v}") for k, v in self.env.items())
        return f'env -i {pairs} TMUX="$TMUX" TMUX_PANE="$TMUX_PANE" bash --norc --noprofile'


@dataclass
class Fake:
    """A fake model API: its URL, when each request arrived (and what it held), when each answer ended."""

    url: str
    arrivals: list[tuple[float, str]]
    server: Any

    def first_arrival(self, marker: str, since: float) -> float | None:
        return next((t for t, body in list(self.arrivals) if t >= since and marker in body), None)

    def answer_ends(self) -> list[float]:
        """When each turn's last event went out (the fakes that record it)."""
        return list(getattr(self.server, "turn_finished_at", []))


def _stamped(server: Any) -> list[tuple[float, str]]:
    """Timestamp every request the server records, on arrival (its ``_record``, called by its handler)."""
    arrivals: list[tuple[float, str]] = []
    record = server._record

    def stamped(request: Any) -> Any:
        arrivals.append((time.time(), json.dumps(getattr(request, "body", request), default=str)))
        return record(request)

    server._record = stamped
    return arrivals


@contextlib.contextmanager
def fake_api(agent: str, answer: Callable[[str], str] | None = None) -> Iterator[Fake]:
    """The agent's fake API, running; ``answer`` (Claude Code only) answers each prompt."""
    if agent == "claude":
        from tests.fakes.claude_api import ClaudeAPI

        with ClaudeAPI(answer=answer or (lambda p: TARGET_ANSWER), chunk_delay_s=0.005) as api:
            yield Fake(api.url, _stamped(api), api)
    elif agent == "codex":
        from tests.fakes.openai_responses import FakeResponses, Reply

        fake = FakeResponses()
        arrivals = _stamped(fake)
        fake.start()
        fake.default = Reply(TARGET_ANSWER, chunk_delay_s=0.005)
        try:
            yield Fake(fake.base_url, arrivals, fake)
        finally:
            fake.stop()
    elif agent == "gemini":
        from tests.fakes.gemini_api import FakeGemini

        with FakeGemini(answer=lambda p: TARGET_ANSWER) as api:
            yield Fake(api.url, _stamped(api), api)
    else:
        from tests.fakes.openai_chat import FakeChat

        with FakeChat(chunk_delay_s=0.005) as chat:
            chat.default = TARGET_ANSWER
            yield Fake(chat.url, _stamped(chat), chat)


def make_home(agent: str, root: Path, url: str) -> Home:
    """``agent``'s isolated home under ``root``, pointed at ``url``."""
    package, version = resolve(agent)
    binary = install(package, version, node=node_22() if agent == "pi" else None)  # pi 1.x: Node ≥ 22.19
    if agent == "claude":
        from tests.support.claude import make_claude_home

        c = make_claude_home(root, api_url=url, claude_bin=binary, version=version)
        return Home(c.env, c.project, "claude")
    if agent in ("codex", "opencode"):
        from tests.record_paste_screens import _codex_launch, _opencode_launch

        launch = (_codex_launch if agent == "codex" else _opencode_launch)(root, binary, version, url)
        return Home(launch.env, launch.cwd, agent)
    if agent == "gemini":
        from tests.support.gemini import make_gemini_home

        g = make_gemini_home(root, api_url=url, gemini_bin=binary)
        return Home(g.env, g.project, "gemini")
    if agent == "copilot":
        from tests.support.copilot import make_copilot_home

        o = make_copilot_home(root, api_url=url, copilot_bin=binary, version=version)
        return Home(o.env, o.project, "copilot")
    if agent == "qwen":
        from tests.support.qwen import make_qwen_home

        q = make_qwen_home(root, api_url=url, qwen_bin=binary, node_dir=node_22_dir())
        return Home(q.env, q.project, "qwen")
    if agent == "pi":
        from tests.support.pi import make_pi_home

        p = make_pi_home(root, api_url=url, pi_bin=binary, node=node_22())
        return Home(p.env, p.project, "pi")
    if agent == "cline":
        from tests.support.cline import make_cline_home

        cl = make_cline_home(root, api_url=url, cline_bin=binary)
        return Home(cl.env, cl.project, "cline", end=cl.end)  # its hub daemon outlives the pane
    raise ValueError(f"no real CLI for {agent!r}")


#: the agents this bench knows, in the order it runs them
AGENTS = ("claude", "codex", "opencode", "gemini", "copilot", "qwen", "pi", "cline")
