"""Agents whose permission prompt only their screen shows — OpenCode (not in its store), Codex (not in its
rollout), Claude Code followed from its screen (no session file) and Copilot CLI before its events say so
(no session found) — seen waiting for a person.

Each stand-in is a real pane: a process named like the agent (a copy of ``sleep``) under a shell that draws
the agent's recorded screens in turn, moving on when the test touches a file — the permission prompt, then
the idle screen after it, then the prompt again, then idle. The real pipeline runs on it with a webhook on
127.0.0.1: ``baton status`` says ``waiting: permission prompt`` and what the dialog asks, a hand-off queued
meanwhile is not typed into the dialog and is typed once the dialog is gone, and the person is told once per
episode.
"""

from __future__ import annotations

import json
import shlex
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline.plugin.events import Delivery, Prompt
from pipeline.system import proc
from pipeline.views.tile_status import tile_status
from plugins.claude_code.adapter import ClaudeCodeAdapter
from plugins.claude_code.files import project_folder_name
from plugins.claude_code.screen import dialog
from plugins.codex.screen import approval_prompt, composer_draft
from plugins.codex.turns import RolloutState
from plugins.copilot.screen import approval_prompt as copilot_approval
from plugins.opencode.screen import permission_prompt
from tests.fakes.webhook import WebhookReceiver
from tests.support.claude import Transcript
from tests.support.paths import FIXTURES
from tests.support.pipelines import REGISTRIES, make_config, running
from tests.support.polling import aquiet_for, until, wait_for
from tests.support.tmux import TmuxServer

CLAUDE_197, CLAUDE_332 = FIXTURES / "claude-code" / "screens", FIXTURES / "claude-code-2.1.332" / "screens"
CODEX = FIXTURES / "codex" / "approval"
OPENCODE = FIXTURES / "opencode" / "screens"
COPILOT = FIXTURES / "copilot-1.0.102" / "screens"


@dataclass(frozen=True)
class Agent:
    """One agent's stand-in: its process name, its recorded dialog and idle screens, the environment that
    points it at an empty home of its own (no session file, rollout or store to read)."""

    kind: str
    dialog: Path
    idle: Path
    #: what ``baton status --json`` says it asks (``waiting_for``)
    asks: str = ""
    reason: str = "permission prompt"
    #: Claude Code only: a transcript and no session file (versions before it), so the files are followed
    transcript: bool = False

    def env(self, tmp: Path) -> dict[str, str]:
        homes = {"claude": {"CLAUDE_CONFIG_DIR": str(tmp / "config")},
                 "codex": {"CODEX_HOME": str(tmp / "codex-home")},
                 "opencode": {"XDG_DATA_HOME": str(tmp / "data")},
                 "copilot": {"COPILOT_HOME": str(tmp / "copilot-home")}}
        return {"HOME": str(tmp), **homes[self.kind]}


CLAUDE_197_ASKS = "Do you want to proceed?\nBash command: touch perm_marker.txt && ls"
AGENTS = {
    "opencode": Agent("opencode", OPENCODE / "screen_permission_prompt.txt", OPENCODE / "screen_done.txt",
                      "Permission required\n← Access external directory /etc"),
    "codex": Agent("codex", CODEX / "screen_approval.txt", CODEX / "screen_after_approval.txt",
                   "Would you like to run the following command?\n"
                   "$ touch APPROVAL_PROBE.txt && echo PROBE_TOOL_OK"),
    "claude-2.1.197": Agent("claude", CLAUDE_197 / "screen_permission_prompt.txt",
                            CLAUDE_197 / "screen_done.txt", CLAUDE_197_ASKS),
    "claude-2.1.332": Agent("claude", CLAUDE_332 / "screen_permission_prompt.txt",
                            CLAUDE_332 / "screen_done.txt",
                            "Do you want to proceed?\nTool use: Agent(Survey the project)"),
    "claude-auto-mode": Agent("claude", CLAUDE_332 / "screen_auto_mode_dialog.txt",
                              CLAUDE_332 / "screen_done.txt", "Auto mode can't check actions in this session",
                              reason="dialog open"),
    "copilot": Agent("copilot", COPILOT / "screen_09_approval_prompt.txt",
                     COPILOT / "screen_10_tool_approved_done.txt",
                     "Do you want to run this command?\nPrint hello: touch approved.txt && echo hello"),
    "copilot-folder-trust": Agent("copilot", COPILOT / "screen_01_first_run_folder_trust.txt",
                                  COPILOT / "screen_02_idle_start.txt",
                                  "Do you trust the files in this folder?\n"
                                  "Confirm folder trust: /home/dev/my-app",
                                  reason="dialog open"),
    "claude-transcript-only": Agent("claude", CLAUDE_197 / "screen_permission_prompt.txt",
                                    CLAUDE_197 / "screen_done.txt", CLAUDE_197_ASKS, transcript=True),
}


def test_the_dialogs_are_read_from_the_recorded_screens_and_nothing_else_is_one() -> None:
    readers = {"opencode": (permission_prompt, OPENCODE), "codex": (approval_prompt, FIXTURES / "codex"),
               "claude": (dialog, FIXTURES), "copilot": (copilot_approval, FIXTURES / "copilot-1.0.102")}
    for name, agent in AGENTS.items():
        read, root = readers[agent.kind]
        assert read(agent.dialog.read_text()) == agent.reason, name
        others = [p for p in root.rglob("screen_*.txt") if p != agent.dialog and p.name not in
                  ("screen_permission_prompt.txt", "screen_approval.txt", "screen_auto_mode_dialog.txt",
                   "screen_28_pinned_approval_prompt.txt", "screen_01_first_run_folder_trust.txt",
                   "screen_09_approval_prompt.txt")]
        assert others and all(read(p.read_text()) is None for p in others), name
    # the selected answer of an approval is drawn like Codex's input line (``› 1. Yes, proceed (y)``): it is
    # no draft (a crash-recovered hand-off that matched it would press Enter on the dialog)
    assert composer_draft(AGENTS["codex"].dialog.read_text()) is None


def test_codex_writes_no_approval_request_to_its_rollout() -> None:
    """Recorded from Codex 0.171.0 with the dialog open: the rollout ends at the escalated ``function_call``
    (and its token record); nothing names the request, so only the screen can say a person is needed."""
    during = [json.loads(line) for line in (CODEX / "rollout_during_approval.jsonl").read_text().splitlines()]
    after = [json.loads(line) for line in (CODEX / "rollout_after_approval.jsonl").read_text().splitlines()]
    assert after[:len(during)] == during
    call = during[-2]["payload"]
    assert call["type"] == "function_call" and "require_escalated" in call["arguments"]
    kinds = {(r["type"], (r.get("payload") or {}).get("type")) for r in during}
    assert not any("approv" in str(kind) for kind in kinds)
    state = RolloutState()
    for record in during:
        state.feed(record)
    assert state.busy  # an open turn: no hand-off is typed, but nothing says why
    for record in after[len(during):]:
        state.feed(record)
    finished = state.last_finished()
    assert finished is not None and finished.answer == "APPROVED_ANSWER the file is there."


class StandIn:
    """A pane whose agent process is named ``agent.kind`` and whose screen shows ``screens`` one after the
    other: each next one once :meth:`next` is called. On the idle screens a line typed there is echoed
    back (``● got: …``), so a submitted hand-off changes the screen, as an agent starting a turn does."""

    def __init__(self, server: TmuxServer, tmp: Path, agent: Agent, screens: list[Path]) -> None:
        self.server, self.tmp, self.steps = server, tmp, 0
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        shutil.copy(shutil.which("sleep") or "/bin/sleep", bin_dir / agent.kind)
        self.cwd = tmp / "project"
        self.cwd.mkdir()
        show = []
        for n, screen in enumerate(screens):
            show.append(f"printf '\\033[H\\033[2J'; cat {shlex.quote(str(screen))}")
            if screen == agent.idle:  # a typed line, read and shown: the 'turn' it starts
                show.append("read -r line; printf '\\n● got: %s\\n' \"$line\"")
            show.append(f"until [ -e {tmp / f'go{n + 1}'} ]; do sleep 0.05; done")
        script = f"{agent.kind} 600 & " + "; ".join(show) + "; wait"
        self.pane = server.new_pane(f"bash --norc --noprofile -c {shlex.quote(script)}", cwd=self.cwd,
                                    env={"PATH": f"{bin_dir}:/usr/bin:/bin", **agent.env(tmp)})
        shell = server.pane_pid(self.pane)
        wait_for(lambda: proc.find_agent(shell, {agent.kind}), what=f"the {agent.kind} stand-in")
        if agent.transcript:  # written after the process started, as Claude Code writes it
            session = str(uuid.uuid4())
            folder = tmp / "config" / "projects" / project_folder_name(str(self.cwd))
            folder.mkdir(parents=True)
            Transcript(folder / f"{session}.jsonl", session).turn("earlier work", "done")

    def next(self) -> None:
        self.steps += 1
        (self.tmp / f"go{self.steps}").touch()


@pytest.mark.tmux
@pytest.mark.anyio
@pytest.mark.parametrize("name", list(AGENTS))
async def test_a_tile_at_a_permission_prompt_says_so_waits_for_its_hand_off_and_tells_once_per_episode(
        name: str, tmux_server: TmuxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = AGENTS[name]
    # Claude Code with no session file waits this long for one before it follows the screen
    monkeypatch.setattr(ClaudeCodeAdapter, "startup_grace_s", 0.5)
    scene = StandIn(tmux_server, tmp_path, agent, [agent.dialog, agent.idle, agent.dialog, agent.idle])
    await until(lambda: tmux_server.capture(scene.pane).strip() != "", what="the recorded dialog")
    webhook = WebhookReceiver().start()
    try:
        config = make_config({"agent": {"pane": scene.pane, "agent": agent.kind}}, [],
                             notify=[{"kind": "webhook", "url": f"{webhook.url}/hook"}])
        [row] = await tile_status(config, REGISTRIES, tmux_server.tmux)  # what `baton status` prints
        assert (row["state"], row["waiting_for"]) == (f"waiting: {agent.reason}", agent.asks), row
        if agent.kind == "claude":  # followed from its files (a transcript) or from its screen
            assert (row["transcript"] is not None) == agent.transcript
        deliveries: list[Delivery] = []
        text = "HANDOFF from the reviewer: add a test for parse()"
        async with running(config, tmux_server, deliveries) as pipeline:
            looks: list[str | None] = []  # what the tile's follower reports on each look (ctx.waiting)
            ctx = pipeline.tiles["agent"].ctx
            tell = ctx.on_waiting
            assert tell is not None
            ctx.on_waiting = lambda reason: (looks.append(reason), tell(reason))[-1]
            await until(lambda: webhook.events("waiting"), 15, "the waiting notice")
            # what `baton status --all-hosts` shows of this host's tiles (the running pipeline's rows)
            [hosted] = await pipeline.tile_rows()
            assert hosted["state"] == f"waiting ({agent.reason})", hosted
            await pipeline.submit(Prompt(route="r", source="reviewer", target="agent", text=text,
                                         turn_id="t1", hop=1))
            # the dispatcher and the follower look several times meanwhile: nothing typed, one notice
            await aquiet_for(2.0, "a hand-off typed into the dialog, or a second notice for one episode")
            assert deliveries == [] and "HANDOFF" not in tmux_server.capture(scene.pane)
            assert [e["message"] for e in webhook.events("waiting")] == [f"agent is waiting: {agent.reason}"]
            scene.next()  # the person answers the dialog: the idle screen
            await until(lambda: deliveries, 20, "the hand-off, typed once the dialog is gone")
            assert [(d.state, d.attempts) for d in deliveries] == [("delivered", 1)]
            assert tmux_server.capture(scene.pane).count(f"● got: {text}") == 1
            [row] = await tile_status(config, REGISTRIES, tmux_server.tmux)
            assert not row["state"].startswith("waiting") and row["waiting_for"] is None, row
            await until(lambda: looks[-1] is None, 15, "the follower to see the dialog gone")
            assert set(looks) == {agent.reason, None}
            scene.next()  # a second episode: a second notice
            await until(lambda: len(webhook.events("waiting")) == 2, 15, "the second episode's notice")
            scene.next()
            await aquiet_for(1.0, "a notice once the dialog is gone")
    finally:
        webhook.stop()
    assert len(webhook.events("waiting")) == 2
