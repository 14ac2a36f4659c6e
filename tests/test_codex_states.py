"""The real Codex CLI's states on the board, proven against the fake Responses API's log and its screen
(tests/support/state_proof.py): start (0.171 shows no dialog) → idle → working (a slowly streamed answer)
→ idle → an approval prompt (``-a on-request``, a command asking to leave the sandbox) → ``baton approve`` →
working → idle → Esc → idle → a turn the API answers ``500`` → idle, the board sampled every ~150 ms.

The screen's truth counts an answer streaming as working: Codex 0.171.0 draws no busy line meanwhile, and
the input line reads as idle. Read as idle, it let the test type its next prompt while an answer streamed
(Enter then steered it into the running turn; an Esc followed at once by the prompt's first key was one
Alt key, and the turn ran on to its end) and made the truth ``idle`` a second after that Esc while Codex
still answered: the board's ``working`` (the rollout's open turn, right) was once a "contradiction"."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.codex.screen import answer_streaming, approval_prompt, composer_draft
from tests.agent_versions import resolve
from tests.fakes.openai_responses import FakeResponses, Reply, codex_config
from tests.support.codex import stop_daemon
from tests.support.paths import FIXTURES
from tests.support.polling import wait_for
from tests.support.real_cli import npm_package
from tests.support.state_proof import Screen, StateProof
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

CODEX = resolve("codex")
SLOW = Reply("The plan, streamed slowly: " + "step by step, " * 10, chunk_delay_s=0.6)  # 5 chunks: ~3 s

CODEX_SCREEN = Screen(
    dialog=lambda s: approval_prompt(s) is not None,
    busy=lambda s: "esc to interrupt" in s or answer_streaming(s),
    ready=lambda s: composer_draft(s) is not None,
)


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    return npm_package(CODEX)


@pytest.fixture
def api() -> Iterator[FakeResponses]:
    with FakeResponses() as fake:
        yield fake


@pytest.mark.parametrize(("name", "kind"), [("streaming", "working"), ("streaming_first_line", "working"),
                                           ("streaming_draft", "working"),
                                           ("answered", "idle"), ("interrupted", "idle"), ("failed", "idle")])
def test_the_truth_reads_a_streaming_answer_as_working(name: str, kind: str) -> None:
    """The screens of the run that saw a "contradiction" (tests/fixtures/codex-0.171.0/states/): the answer
    streaming under an idle-looking input is working, and only a line that ends the turn makes it idle."""
    screen = (FIXTURES / "codex-0.171.0" / "states" / f"{name}.txt").read_text()
    assert CODEX_SCREEN.kind(screen) == kind


def test_the_board_shows_codexs_states_truly_and_soon(
        tmux_server: TmuxServer, tmp_path: Path, codex_bin: Path, api: FakeResponses,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    home, project = tmp_path / "codex-home", tmp_path / "api"
    for folder in (home, project, tmp_path / "home"):
        folder.mkdir()
    (home / "config.toml").write_text(codex_config(api.base_url))  # the project not trusted: its dialog
    monkeypatch.setenv("CODEX_HOME", str(home))  # where the board finds the rollouts
    env = {"HOME": str(tmp_path / "home"), "CODEX_HOME": str(home), "FAKE_KEY": "sk-fake-test"}
    pane = tmux_server.new_pane(env=env, cwd=project, height=48)
    routes = tmp_path / "routes.yaml"
    proof = StateProof("codex", tmux_server, pane, CODEX_SCREEN, routes)
    marker = project / "APPROVED_MARKER.txt"
    api.script(SLOW, Reply(call=("exec_command", {
        "cmd": f"touch {marker.name} && echo E2E_TOOL_OK", "sandbox_permissions": "require_escalated",
        "justification": "Create the marker file the user asked for"})),
        "APPROVED_ANSWER the marker is there.", SLOW, Reply(status=500))

    def prompt(text: str) -> None:
        for attempt in range(3):  # a loaded Codex may drop keys typed while it redraws: cleared, typed again
            tmux_server.run("send-keys", "-t", pane, "-l", text)
            try:
                wait_for(lambda: composer_draft(tmux_server.capture(pane)) == text, timeout=10,
                         what="the typed prompt")
                break
            except AssertionError:
                if attempt == 2:
                    raise
                tmux_server.run("send-keys", "-t", pane, "C-u")
        proof.hold(0.3)  # an Enter sooner after typing is taken as part of a paste (docs/agents.md, Codex)
        proof.press("Enter")
        wait_for(lambda: composer_draft(tmux_server.capture(pane)) != text, what="the prompt sent")

    try:
        with proof.running():
            proof.key("codex")
            tmux_server.type(pane, f"{codex_bin} -a on-request -s workspace-write")
            proof.wait_screen("idle", 120, hold_s=1.5)  # no start-up dialog in an untrusted folder
            proof.answer_turn("Write the plan, slowly", prompt)
            proof.phase("permission")
            prompt("Create the marker file")
            proof.wait_screen("waiting", hold_s=1.5)
            proof.phase("approved")
            proof.approve()
            wait_for(lambda: len(api.streams) >= 3 and api.streams[2].ended, what="the answer after it")
            proof.wait_screen("idle", hold_s=1.5)
            proof.phase("interrupted")
            prompt("A long answer to interrupt")
            wait_for(lambda: api.streams[-1].first_chunk, what="the slow answer streaming")
            proof.hold(1.5)
            proof.press("Escape")
            proof.wait_screen("idle", hold_s=1.5)
            assert "■ Conversation interrupted" in tmux_server.capture(pane), tmux_server.capture(pane)
            proof.phase("failed")
            prompt("The API fails this one")
            wait_for(lambda: api.streams[-1].status == 500, what="the API's 500")
            proof.wait_screen("idle")
            proof.hold(2.0)
    finally:
        stop_daemon(home)
        shutil.rmtree(home / "packages", ignore_errors=True)  # the 315 MB binary copy
    assert marker.exists()
    proof.report(f"Codex {CODEX[1]}", api.streams, capsys)
