"""A fan-out and a join on the REAL CLIs (issue #40): a real Claude Code coder whose answer fans out to a real
Codex and a real Claude Code reviewer, joined back into the coder — one prompt holding both verdicts.

Each CLI runs from npm (cached; tests/agent_versions.py: pinned, or ``latest`` with ``BATON_AGENTS=latest``,
as the canary runs it) in its own pane of a private tmux server, against its fake API on 127.0.0.1 (Claude
Code: tests/fakes/claude_api.py, one server for both of its panes, each with its own CLAUDE_CONFIG_DIR;
Codex: tests/fakes/openai_responses.py, the session's CODEX_HOME of tests/support/codex_cli.py). The real
pipeline routes between them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.plugin.events import Prompt
from plugins.claude_code.paste import unwrap_paste
from plugins.claude_code.screen import input_box
from tests.fakes.claude_api import ClaudeAPI
from tests.fakes.npm_agents import CLAUDE_CODE
from tests.support import claude as claude_support
from tests.support import codex_cli
from tests.support.claude import ClaudeHome, make_claude_home
from tests.support.codex_cli import CodexWorld, start_codex
from tests.support.pipelines import make_config, running
from tests.support.polling import aquiet_for, until, wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow, pytest.mark.anyio]
#: the real Claude Code from npm (a fixture, shared by the files that run it)
claude_bin = claude_support.claude_bin

#: the session's Codex home and fake API (a fixture, shared with tests/test_codex_e2e.py)
codex_world = codex_cli.codex_world

TASK = "Make refresh() refuse expired tokens."
CHANGE = "CHANGE: refresh() now refuses expired tokens ✓"
CLAUDE_VERDICT = "CLAUDE VERDICT: approve — the change is small."
CODEX_VERDICT = "CODEX VERDICT: add a test for an expired token."
DONE = "DONE: both verdicts read, adding the test."
REVIEW = "Review this change:\n\n{response}"
JOINED = f"The reviews:\n\n## codex\n\n{CODEX_VERDICT}\n\n## reviewer\n\n{CLAUDE_VERDICT}"


def claude_answer(prompt: str) -> str:
    """The coder's and the Claude reviewer's model: what each is asked decides what it answers."""
    if "Review this change" in prompt:
        return CLAUDE_VERDICT
    if "The reviews" in prompt:
        return DONE
    return CHANGE


def start_claude(server: TmuxServer, root: Path, api: ClaudeAPI, claude_bin: Path, state: Path) -> str:
    """A real Claude Code in a new pane, with its own config folder; once its input box shows."""
    home: ClaudeHome = make_claude_home(root, api_url=api.url, claude_bin=claude_bin, version=CLAUDE_CODE[1],
                                        extra_env={"XDG_STATE_HOME": str(state)})
    pane = server.new_pane(home.shell_command(), cwd=home.project, width=120, height=40)
    server.type(pane, "claude")
    wait_for(lambda: home.session_files() and input_box(server.capture(pane)) == "", 90,
             what=f"Claude Code's input box in {root.name}")
    return pane


async def test_a_claude_coder_fans_out_to_codex_and_claude_reviewers_and_gets_one_prompt_with_both(
    codex_world: CodexWorld, tmux_server: TmuxServer, tmp_path: Path, claude_bin: Path,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    world = codex_world
    monkeypatch.setenv("XDG_STATE_HOME", str(world.state))  # Codex's notify spools its records there
    caplog.set_level("DEBUG", logger="batonpass")
    codex_asked = len(world.api.answers())
    world.api.script(CODEX_VERDICT)
    with ClaudeAPI(answer=claude_answer) as api:
        coder = start_claude(tmux_server, tmp_path / "coder", api, claude_bin, world.state)
        reviewer = start_claude(tmux_server, tmp_path / "reviewer", api, claude_bin, world.state)
        [codex] = start_codex(tmux_server, world)
        config = make_config(
            {"coder": {"pane": coder, "agent": "claude"}, "codex": {"pane": codex, "agent": "codex"},
             "reviewer": {"pane": reviewer, "agent": "claude"}},
            [{"name": "review", "from": "coder", "to": ["codex", "reviewer"],
              "transform": {"type": "template", "template": REVIEW}},
             {"name": "verdicts", "from": ["codex", "reviewer"], "to": "coder",
              "transform": {"type": "template", "template": "The reviews:\n\n{responses}"}}],
            max_hops=2)  # the coder's answer to the verdicts goes no further

        async with running(config, tmux_server) as pipeline:
            # the Claude Code tiles follow their session files (Codex finds its rollout once handed a turn)
            for tile in ("coder", "reviewer"):
                await until(lambda tile=tile: f"{tile}: following" in caplog.text, 30, f"{tile} followed")
            await pipeline.submit(Prompt(route="task", source="person", target="coder", turn_id="task-1",
                                         hop=0, text=TASK))
            await until(lambda: _asked(api, "The reviews"), 120, "the joined prompt at the coder")
            # three Claude Code turns: the coder's change, the reviewer's verdict, the coder's answer to both
            await until(lambda: len(api.turn_finished_at) >= 3, 60, "the coder's answer to the verdicts")
            await aquiet_for(3.0, "a second joined prompt, or the verdicts' answer reviewed again")
            rows = [(h.route, h.source, h.target, h.state, h.hop) for h in pipeline.journal.history()
                    if h.route != "task"]

        # each reviewer was handed the coder's change once
        assert _asked(api, "Review this change") == [REVIEW.format(response=CHANGE)]
        reviews = [r.prompt for r in world.api.answers()[codex_asked:]]
        assert reviews == [REVIEW.format(response=CHANGE)], reviews
        # the coder got ONE prompt holding both verdicts, each under its tile's heading, in from:'s order
        assert _asked(api, "The reviews") == [JOINED]
        assert _asked(api, TASK) == [TASK]
        # the journal: one hand-off per reviewer, and the joined one, each delivered once, the join a hop
        # more than its answers; the coder's answer to it is not sent for review again (max_hops)
        assert sorted(rows) == [("review", "coder", "codex", "delivered", 1),
                                ("review", "coder", "codex", "skipped", 3),
                                ("review", "coder", "reviewer", "delivered", 1),
                                ("review", "coder", "reviewer", "skipped", 3),
                                ("verdicts", "codex,reviewer", "coder", "delivered", 2)], rows


def _asked(api: ClaudeAPI, start: str) -> list[str]:
    """The prompts the Claude Code panes sent their model that hold ``start`` (one model call per
    turn: the fake model answers with text, never a tool call), as typed: a long paste reaches the model
    in Claude Code's ``<pasted_content>`` wrapper."""
    return [unwrap_paste(r.last_user_text) for r in api.turns if start in r.last_user_text]
