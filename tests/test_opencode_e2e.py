"""The real OpenCode (``opencode-ai`` from npm, the release docs/agents.md's OpenCode facts were recorded
from) in a real tmux pane, talking to the fake OpenAI-compatible server on 127.0.0.1, with the real pipeline:

* a prompt handed to OpenCode starts a turn — confirmed by the new user message in its store;
* that turn's answer is handed to a second pane exactly once, exactly as the model wrote it;
* ``baton resolve`` on OpenCode's pane names its session.

It prints the time from the answer landing in the store (the final message's ``time.completed``) to the
paste in the target pane. Isolated: temporary HOME and XDG folders, no model list fetch, no autoupdate,
and npm's registry pointed at a closed loopback port (OpenCode installs a plugin package in the
background; it fails at once and OpenCode carries on).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from pipeline import cli
from pipeline.engine.actions import Action, perform
from pipeline.engine.config import Config
from pipeline.engine.runtime import Pipeline
from pipeline.plugin.events import Delivery, Prompt
from pipeline.plugin.manager import load_registries
from pipeline.system import proc
from pipeline.views.tile_status import tile_status
from plugins.opencode.reader import OpenCodeStore
from plugins.opencode.screen import input_draft
from tests.agent_versions import resolve
from tests.fakes.npm_agents import NpmInstallError, install
from tests.fakes.openai_chat import FakeChat, opencode_config
from tests.fakes.webhook import WebhookReceiver
from tests.support.agents import demo_agent_command, messages, read_log
from tests.support.crash_at_paste import LONG_TEMPLATE, crash_at_paste
from tests.support.opencode import opencode_env, stop_left_behind
from tests.support.polling import aquiet_for, until, wait_for
from tests.support.tmux import TmuxServer

#: the release the facts of docs/agents.md (OpenCode) were recorded from
OPENCODE = resolve("opencode")  # pinned, or npm latest with BATON_AGENTS=latest
PROMPT = "Write the greeting helper and show it to me (e2e)"
ANSWER = (
    'Here is the helper:\n\n```python\ndef greet(name: str) -> str:\n    return f"hello {name}"\n```\n\n'
    "- it takes a name\n- it returns the greeting\n\nE2E_ANSWER_END"
)


@pytest.fixture(scope="session")
def opencode_bin() -> Path:
    try:
        return install(*OPENCODE)
    except NpmInstallError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"cannot install {OPENCODE[0]}@{OPENCODE[1]} from npm: {exc}")
        pytest.skip(f"cannot install {OPENCODE[0]}@{OPENCODE[1]} from npm ({exc}); in CI this fails")


@pytest.fixture(scope="session")
def fake_chat() -> Iterator[FakeChat]:
    with FakeChat() as chat:
        yield chat


@pytest.mark.tmux
@pytest.mark.slow
@pytest.mark.anyio
async def test_real_opencode_hands_off_and_takes_prompts(
    tmux_server: TmuxServer,
    tmp_path: Path,
    opencode_bin: Path,
    fake_chat: FakeChat,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home, project = tmp_path / "home", tmp_path / "web"
    project.mkdir()
    env = opencode_env(home, opencode_bin)
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(opencode_config(fake_chat.url)))
    oc = tmux_server.new_pane("opencode", cwd=project, env=env)
    started: list[proc.Proc] = []
    try:
        wait_for(lambda: "Ask anything" in tmux_server.capture(oc), timeout=60, what="OpenCode's input box")
        found = proc.find_agent(tmux_server.pane_pid(oc), {"opencode"})
        assert found is not None and found.comm == "opencode"
        started = list(proc.subtree(found.pid))
        log = tmp_path / "target.jsonl"
        target = tmux_server.new_pane(demo_agent_command("target", log=log))
        wait_for(lambda: "demo❯" in tmux_server.capture(target), what="the demo agent")
        fake_chat.script(ANSWER)

        registries = load_registries()
        config = Config.model_validate({"version": 1, "tiles": {"oc": {"pane": oc}, "t": {"pane": target}},
                                        "routes": [{"from": "oc", "to": "t"}]})
        deliveries: list[Delivery] = []
        pipeline = Pipeline(config, registries, tmux_server.tmux,
                            report=lambda e: deliveries.append(e) if isinstance(e, Delivery) else None)
        db = home / ".local/share/opencode/opencode.db"
        async with anyio.create_task_group() as tg:
            await tg.start(pipeline.run)
            assert pipeline.tiles["oc"].adapter.name == "opencode"  # agent: auto, from the process tree
            # (b) a prompt handed to OpenCode starts a turn: a new user message in its store
            await pipeline.submit(
                Prompt(route="test", source="test", target="oc", text=PROMPT, turn_id="e2e-1", hop=0)
            )
            await until(lambda: any(d.prompt.target == "oc" for d in deliveries), 30, "the hand-off to oc")
            assert [d.state for d in deliveries if d.prompt.target == "oc"] == ["delivered"]
            [session] = OpenCodeStore(db).sessions(str(project))
            assert session.recent_prompts[0] == PROMPT
            # (a) its answer reaches the second pane, exactly, once
            await until(lambda: messages(log), 45, "OpenCode's answer in the second pane")
            await aquiet_for(2.0, "a second hand-off")
            tg.cancel_scope.cancel()
        assert messages(log) == [ANSWER]
        assert [d.state for d in deliveries if d.prompt.target == "t"] == ["delivered"]

        end = OpenCodeStore(db).last_turn(session.id)
        assert end.text == ANSWER
        received = next(r["t"] for r in read_log(log) if "message" in r)
        paste = received - registries.agents.get("demo").submit_delay_s
        last_chunk = fake_chat.turns()[-1].t_last_chunk
        with sqlite3.connect(
            f"file:{db}?mode=ro", uri=True
        ) as conn:  # when the answer's text part was written
            [(text_ms,)] = conn.execute("SELECT max(time_updated) FROM part WHERE message_id = ? AND "
                                        "json_extract(data, '$.type') = 'text'", (end.turn_id,)).fetchall()
        done = end.completed_ms / 1000
        with capsys.disabled():
            print(
                f"\nOpenCode e2e: model's last chunk -> text in the store {text_ms / 1000 - last_chunk:.3f}s"
                f" -> turn completed in the store {done - text_ms / 1000:.3f}s"
                f" -> paste in the target {paste - done:.3f}s"
            )

        # (c) baton resolve names the session
        assert (
            await anyio.to_thread.run_sync(cli.main, ["resolve", oc, "-L", tmux_server.socket, "--json"]) == 0
        )
        steps = {s["step"]: s for s in json.loads(capsys.readouterr().out)["steps"]}
        assert steps["session"]["value"]["session_id"] == session.id
        assert steps["answer"]["value"] == end.turn_id
    finally:
        tmux_server.kill()
        stop_left_behind(started)


@pytest.mark.tmux
@pytest.mark.slow
@pytest.mark.anyio
async def test_real_opencode_at_a_permission_prompt_is_waiting_told_once_and_gets_its_hand_off_after(
    tmux_server: TmuxServer, tmp_path: Path, opencode_bin: Path, fake_chat: FakeChat
) -> None:
    """``"permission": {"bash": "ask"}`` and a model that calls bash: OpenCode shows its permission dialog,
    which its store does not record (the tool part stays ``running``). Read from the screen: ``baton
    status`` says waiting, the person is told once, and a hand-off queued meanwhile is typed only after the
    person allowed the command (``baton approve``'s keys: Enter on "Allow once") and the turn ended —
    never into the dialog (Enter there would answer it)."""
    home, project = tmp_path / "home", tmp_path / "web"
    project.mkdir()
    env = opencode_env(home, opencode_bin)
    (home / ".config" / "opencode").mkdir(parents=True)
    config_json = opencode_config(fake_chat.url) | {"permission": {"bash": "ask"}}
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(config_json))
    oc = tmux_server.new_pane("opencode", cwd=project, env=env)
    webhook = WebhookReceiver().start()
    started: list[proc.Proc] = []
    try:
        wait_for(lambda: "Ask anything" in tmux_server.capture(oc), timeout=60, what="OpenCode's input box")
        found = proc.find_agent(tmux_server.pane_pid(oc), {"opencode"})
        assert found is not None
        started = list(proc.subtree(found.pid))
        registries = load_registries()
        notify = [{"kind": "webhook", "url": f"{webhook.url}/h"}]
        config = Config.model_validate({"version": 1, "tiles": {"oc": {"pane": oc, "agent": "opencode"}},
                                        "settings": {"notify": notify}})
        deliveries: list[Delivery] = []
        pipeline = Pipeline(config, registries, tmux_server.tmux,
                            report=lambda e: deliveries.append(e) if isinstance(e, Delivery) else None)
        handoff = "HANDOFF from the reviewer: look at the listing"
        async with anyio.create_task_group() as tg:
            await tg.start(pipeline.run)
            await pipeline.submit(Prompt(route="seed", source="test", target="oc", turn_id="s-1", hop=0,
                                         text="TOOLTEST: list the files (asks first)"))
            await until(lambda: webhook.events("waiting"), 60, "the notice of OpenCode's permission prompt")
            assert "Permission required" in tmux_server.capture(oc)
            [row] = await tile_status(config, registries, tmux_server.tmux)
            assert row["state"] == "waiting: permission prompt"
            assert row["waiting_for"].startswith("Permission required\n"), row
            await pipeline.submit(Prompt(route="handoff", source="reviewer", target="oc", turn_id="h-1",
                                         hop=1, text=handoff))
            await aquiet_for(2.0, "the hand-off typed into the permission dialog")
            assert [d.prompt.route for d in deliveries] == ["seed"]
            assert "HANDOFF" not in tmux_server.capture(oc)
            assert len(webhook.events("waiting")) == 1  # one episode, however many looks
            routes = tmp_path / "routes.yaml"
            routes.write_text(json.dumps({"version": 1, "tiles": {"oc": {"pane": oc, "agent": "opencode"}}}))
            allowed = await perform(Action("approve", "oc"), config_path=routes, tmux=tmux_server.tmux)
            assert allowed.ok and "(keys Enter)" in allowed.message, allowed  # the person allows it once
            await until(lambda: [d.prompt.route for d in deliveries] == ["seed", "handoff"], 60,
                        "the hand-off, typed after the turn")
            assert [d.state for d in deliveries] == ["delivered", "delivered"]
            assert any(r.kind == "tool-final" for r in fake_chat.requests)  # the command ran, then the turn
            await until(lambda: any(r.last_user_text == handoff for r in fake_chat.requests), 30,
                        "the hand-off reaching the model as a prompt of its own")
            tg.cancel_scope.cancel()
        assert [e["message"] for e in webhook.events("waiting")] == ["oc is waiting: permission prompt"]
    finally:
        webhook.stop()
        tmux_server.kill()
        stop_left_behind(started)


@pytest.mark.tmux
@pytest.mark.slow
def test_real_opencode_as_target_killed_between_paste_and_enter_takes_the_prompt_once(
    tmux_server: TmuxServer, tmp_path: Path, opencode_bin: Path, fake_chat: FakeChat,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``baton run`` killed the moment the real OpenCode shows the hand-off as ``[Pasted ~N lines]`` in its
    input, then started again: it recognises its own paste, presses Enter once, and the store holds the
    prompt exactly once (tests/support/crash_at_paste.py)."""
    home, project = tmp_path / "home", tmp_path / "web"
    project.mkdir()
    env = opencode_env(home, opencode_bin)
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(opencode_config(fake_chat.url)))
    monkeypatch.setenv("XDG_DATA_HOME", env["XDG_DATA_HOME"])  # where the daemon finds the store
    oc = tmux_server.new_pane("opencode", cwd=project, env=env)
    started: list[proc.Proc] = []
    try:
        wait_for(lambda: "Ask anything" in tmux_server.capture(oc), timeout=60, what="OpenCode's input box")
        found = proc.find_agent(tmux_server.pane_pid(oc), {"opencode"})
        assert found is not None
        started = list(proc.subtree(found.pid))
        db = home / ".local/share/opencode/opencode.db"

        def holds_paste() -> bool:
            return input_draft(tmux_server.capture(oc)).startswith("[Pasted ~")

        def prompts() -> list[str]:
            if not db.exists():
                return []
            return [p for s in OpenCodeStore(db).sessions(str(project)) for p in s.recent_prompts]

        note = crash_at_paste(tmux_server, tmp_path, {"pane": oc, "agent": "opencode"}, LONG_TEMPLATE,
                              holds_paste, prompts, marker="OPENCODE-1")
        assert note == "submitted a paste left by a crash"
    finally:
        tmux_server.kill()
        stop_left_behind(started)



#: how many fresh starts the next test makes (BATON_OPENCODE_STARTS=N for a measurement: docs/agents.md)
STARTS = int(os.environ.get("BATON_OPENCODE_STARTS", "1"))


@pytest.mark.tmux
@pytest.mark.slow
@pytest.mark.anyio
async def test_real_opencode_takes_a_hand_off_queued_the_moment_it_starts_once(
    tmux_server: TmuxServer, tmp_path: Path, opencode_bin: Path, fake_chat: FakeChat
) -> None:
    """A fresh OpenCode and a hand-off queued to it at once, through the real dispatcher: typed at the first
    moment batonpass calls it ready — never while it starts and drops what is typed (docs/agents.md,
    OpenCode) — delivered, and the prompt reaches its store and the model exactly once. Per start."""
    for k in range(STARTS):
        await _hand_off_at_start(tmux_server, tmp_path / f"start{k}", opencode_bin, fake_chat,
                                 f"HANDOFF-{k}: look at the listing")


async def _hand_off_at_start(tmux_server: TmuxServer, root: Path, opencode_bin: Path, fake_chat: FakeChat,
                             text: str) -> None:
    home, project = root / "home", root / "web"
    project.mkdir(parents=True)
    env = opencode_env(home, opencode_bin)
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(opencode_config(fake_chat.url)))
    oc = tmux_server.new_pane("opencode", cwd=project, env=env)
    config = Config.model_validate({"version": 1, "tiles": {"oc": {"pane": oc, "agent": "opencode"}}})
    deliveries: list[Delivery] = []
    pipeline = Pipeline(config, load_registries(), tmux_server.tmux,
                        report=lambda e: deliveries.append(e) if isinstance(e, Delivery) else None)
    started: list[proc.Proc] = []
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(pipeline.run)
            await pipeline.submit(Prompt(route="r", source="src", target="oc", text=text, turn_id="t", hop=0))
            await until(lambda: deliveries, 180, "the hand-off's outcome")
            found = proc.find_agent(tmux_server.pane_pid(oc), {"opencode"})
            started = list(proc.subtree(found.pid)) if found else []
            await until(lambda: any(r.last_user_text == text for r in fake_chat.turns()), 60,
                        "the hand-off reaching the model")
            await aquiet_for(1.0, "a second copy")
            tg.cancel_scope.cancel()
        assert [d.state for d in deliveries] == ["delivered"], text
        db = home / ".local/share/opencode/opencode.db"
        assert [p for s in OpenCodeStore(db).sessions(str(project)) for p in s.recent_prompts] == [text]
        assert sum(r.last_user_text == text for r in fake_chat.turns()) == 1
    finally:
        tmux_server.run("kill-pane", "-t", oc, check=False)
        stop_left_behind(started)
