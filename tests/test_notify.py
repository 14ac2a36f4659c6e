"""settings.notify: a person is told once per state change — a tile waiting for them, a hand-off kept or
failed, a loop stopped at max_hops — in a real attached tmux client, on the desktop, and by webhook.

The daemon runs as a real ``baton run``; the webhook is an HTTP server on 127.0.0.1 owned by the test; the
Claude Code tile is a process named ``claude`` whose session file the test writes as Claude Code does; the
tmux client is a real ``tmux attach`` running inside a pane of a second tmux server, read with capture-pane.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.engine.config import ConfigError, parse_config
from pipeline.engine.journal import default_journal_path
from pipeline.engine.notify import Notice, Notifier
from pipeline.engine.notify_config import NotifyTarget
from tests.fakes.webhook import WebhookReceiver
from tests.support.agents import start_agent
from tests.support.claude import Scene
from tests.support.daemons import wait_followed, write_config
from tests.support.paths import REPO
from tests.support.polling import aquiet_for, quiet_for, until, wait_for
from tests.support.tmux import TmuxServer

TOKEN = "tok-S3CRET-0a1b2c3d"
DOWN_TOKEN = "tok-DOWN-9f8e7d6c"


def hanging_listener() -> socket.socket:
    """A loopback port that takes connections (the kernel's backlog) and never answers: a hung server."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    return s


def closed_port() -> int:
    """A loopback port nothing listens on (a webhook that is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fake_notify_send(bin_dir: Path, calls: Path) -> None:
    """A ``notify-send`` that records its arguments, one JSON list per line."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "notify-send"
    script.write_text(f"#!{sys.executable}\nimport json, sys\n"
                      f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
    script.chmod(0o755)


def attach_client(inner: TmuxServer, outer: TmuxServer) -> str:
    """A real client of ``inner``, attached from a pane of ``outer``; returns that outer pane."""
    watch = inner.new_pane()
    session = inner.run("display-message", "-p", "-t", watch, "#{session_name}").strip()
    pane = outer.new_pane(f"env -u TMUX tmux -L {inner.socket} attach -t {session}", width=150, height=20)
    wait_for(lambda: inner.run("list-clients", "-F", "#{client_name}").strip(), what="the attached client")
    return pane


@pytest.mark.tmux
@pytest.mark.slow
def test_one_notice_per_waiting_episode_and_per_kept_failed_or_stopped_handoff(
    tmux_server: TmuxServer, tmp_path: Path, daemon_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "notify-send.jsonl"
    fake_notify_send(tmp_path / "desktop-bin", calls)
    monkeypatch.setenv("PATH", f"{tmp_path / 'desktop-bin'}:{os.environ['PATH']}")
    outer = TmuxServer(tmp_path)
    webhook = WebhookReceiver().start()
    hung = hanging_listener()
    try:
        client = attach_client(tmux_server, outer)
        scene = Scene(tmux_server, tmp_path)
        scene.status("idle")
        a = start_agent(tmux_server, tmp_path / "a.jsonl", "a", work_s=0.2)
        b = start_agent(tmux_server, tmp_path / "b.jsonl", "b", work_s=0.2)
        shell = tmux_server.new_pane()  # the tile's agent exited: a bare shell is left
        hook_url = f"{webhook.url}/hooks/{TOKEN}?auth={TOKEN}"
        down_url = f"http://127.0.0.1:{closed_port()}/x/{DOWN_TOKEN}"
        hung_url = f"http://127.0.0.1:{hung.getsockname()[1]}/x/{DOWN_TOKEN}"
        config = write_config(
            tmp_path / "routes.yaml", tmux_server.socket,
            {"coder": {"pane": scene.pane, "agent": "claude"}, "a": {"pane": a, "agent": "demo"},
             "b": {"pane": b, "agent": "demo"}, "gone": {"pane": shell, "agent": "demo"}},
            [{"from": "a", "to": "b"}, {"from": "b", "to": "a"}, {"from": "a", "to": "gone"}],
            max_hops=1, give_up_s=1.5,
            notify=[{"kind": "webhook", "url": hook_url},
                    {"kind": "webhook", "url": down_url, "timeout_s": 2, "retry_s": 1},
                    {"kind": "webhook", "url": hung_url, "timeout_s": 1, "retry_s": 0},
                    {"kind": "tmux", "display_s": 30}, {"kind": "desktop", "events": ["waiting"]}],
        )
        daemon = daemon_factory(config)
        daemon.start()
        wait_followed(daemon, "a")
        wait_for(lambda: "coder: following" in daemon.stderr(), what="the daemon following coder's session")

        # episode 1: busy -> waiting (the dialog, then the permission prompt: one episode) -> idle
        scene.status("busy")
        scene.status("waiting", waitingFor="dialog open")
        wait_for(lambda: webhook.events("waiting"), what="the first waiting notice")
        wait_for(lambda: "batonpass: coder is waiting: dialog open" in outer.capture(client),
                 what="the notice in the attached tmux client")
        scene.status("waiting", waitingFor="permission prompt")
        scene.status("idle")
        wait_for(lambda: "coder no longer waits" in daemon.stderr(), what="the end of the first episode")
        # episode 2
        scene.status("waiting", waitingFor="permission prompt")
        wait_for(lambda: len(webhook.events("waiting")) == 2, what="the second waiting notice")
        for why in ("dialog open", "permission prompt", "permission prompt"):  # looked at again: same episode
            scene.status("waiting", waitingFor=why)

        # a -> gone is kept (a bare shell), then fails after give_up_s; b's turn (hop 1) stops the loop
        tmux_server.type(a, "seed")
        wait_for(lambda: webhook.events("failed") and webhook.events("max_hops"), timeout=30,
                 what="the failed hand-off and the loop stop")
        wait_for(lambda: "no answer within 1s" in daemon.stderr(), what="the hung webhook given up")
        assert daemon.stop() == 0
    finally:
        webhook.stop()
        hung.close()
        outer.kill()

    got = [(e["event"], e["tile"]) for e in webhook.events()]
    assert sorted(got) == sorted([("waiting", "coder"), ("waiting", "coder"), ("kept", "gone"),
                                  ("failed", "gone"), ("max_hops", "b")]), got
    assert [e["message"] for e in webhook.events("waiting")] == ["coder is waiting: dialog open",
                                                                 "coder is waiting: permission prompt"]
    assert webhook.events("kept")[0]["handoff"] == webhook.events("failed")[0]["handoff"]
    assert webhook.events("max_hops")[0]["route"] == "b->a"
    assert {p.path for p in webhook.requests} == {f"/hooks/{TOKEN}?auth={TOKEN}"}
    # the desktop wanted only "waiting"
    desktop = [json.loads(line) for line in calls.read_text().splitlines()]
    assert [c[-1] for c in desktop] == ["coder is waiting: dialog open",
                                        "coder is waiting: permission prompt"]
    log = daemon.stderr()
    assert TOKEN not in log and DOWN_TOKEN not in log
    # each webhook that is down is reported once, by scheme and host only (a notice still being tried when
    # the daemon stopped is said to be lost, on a line of its own)
    down = [line for line in log.splitlines() if "notice to webhook http://127.0.0.1:" in line
            and "batonpass stopped while" not in line]
    assert len(down) == 2, log
    assert sum("cannot connect" in line for line in down) == 1
    assert sum("no answer within 1s" in line for line in down) == 1
    for f in (p for p in default_journal_path().parent.rglob("*") if p.is_file()):
        assert TOKEN.encode() not in f.read_bytes() and DOWN_TOKEN.encode() not in f.read_bytes()


@pytest.mark.tmux
@pytest.mark.slow
def test_a_reload_keeps_the_waiting_episode_and_the_notice_being_tried(
    tmux_server: TmuxServer, tmp_path: Path, daemon_factory
) -> None:
    webhook = WebhookReceiver(answers=[500, 500]).start()  # fails twice, then works
    try:
        scene = Scene(tmux_server, tmp_path)
        scene.status("idle")
        tiles = {"coder": {"pane": scene.pane, "agent": "claude"}}
        notify = [{"kind": "webhook", "url": f"{webhook.url}/hooks/{TOKEN}"}]
        config = write_config(tmp_path / "routes.yaml", tmux_server.socket, tiles, [], notify=notify)
        daemon = daemon_factory(config)
        daemon.start()

        def followed(times: int) -> bool:
            return daemon.stderr().count("coder: following") == times

        wait_for(lambda: followed(1), what="the daemon following coder's session")
        scene.status("waiting", waitingFor="permission prompt")
        wait_for(lambda: webhook.requests, what="the first try of the waiting notice (answered 500)")
        # routes.yaml changes while the notice is being tried again and coder still waits
        write_config(config, tmux_server.socket, {**tiles, "spare": {"pane": "%999", "agent": "shell"}}, [],
                     notify=notify)
        wait_for(lambda: followed(2), what="the reloaded pipeline following coder (and seeing it wait)")
        wait_for(lambda: webhook.delivered("waiting"), timeout=30, what="the notice, on its third try")
        # once more, with the notice delivered: the new pipeline's look at the waiting tile is no news
        write_config(config, tmux_server.socket, tiles, [], notify=notify, give_up_s=100)
        wait_for(lambda: followed(3), what="the second reload's pipeline following coder")
        scene.status("waiting", waitingFor="dialog open")  # and looked at again
        quiet_for(1.5, "the waiting tile announced again")
        assert [p.answered for p in webhook.requests] == [500, 500, 200]
        assert len({json.dumps(b, sort_keys=True) for b in webhook.events()}) == 1  # tries of one notice
        # the episode ends and a new one is announced: the carried state works on
        scene.status("idle")
        wait_for(lambda: "coder no longer waits" in daemon.stderr(), what="the end of the episode")
        scene.status("waiting", waitingFor="permission prompt")
        wait_for(lambda: len(webhook.delivered("waiting")) == 2, what="the next episode's notice")
        assert daemon.stderr().count("reloading:") == 2
        assert daemon.stop() == 0
    finally:
        webhook.stop()
    assert TOKEN not in daemon.stderr() and "Traceback" not in daemon.stderr()


def test_check_never_shows_the_webhook_url(tmp_path: Path) -> None:
    config = tmp_path / "routes.yaml"
    base = {"version": 1, "tiles": {"a": {"pane": "%1"}}}
    for url, ok in ((f"https://ntfy.example/{TOKEN}", True), (f"ftp://u:{TOKEN}@host/{TOKEN}", False)):
        config.write_text(json.dumps({**base, "settings": {"notify": [{"kind": "webhook", "url": url}]}}))
        for extra in ([], ["--json"]):
            out = subprocess.run([sys.executable, "-m", "pipeline.cli", "check", "-c", str(config), *extra],
                                 capture_output=True, text=True)
            assert (out.returncode == 0) == ok, out
            assert TOKEN not in out.stdout + out.stderr
    assert "the webhook url must be http:// or https://" in out.stdout


def test_the_documented_example_is_valid() -> None:
    page = (REPO / "docs" / "notifications.md").read_text()
    block = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    config, problems = parse_config('version: 1\ntiles: {a: {pane: "%1"}}\n' + block)
    assert problems == [] and [t.kind for t in config.settings.notify] == ["tmux", "desktop", "webhook"]
    config, _ = parse_config((REPO / "routes.yaml").read_text())
    assert [t.kind for t in config.settings.notify] == ["tmux"]


def test_settings_validate_each_place() -> None:
    def problems(notify: object) -> list[str]:
        try:
            parse_config(json.dumps({"version": 1, "tiles": {"a": {"pane": "%1"}},
                                     "settings": {"notify": notify}}))
        except ConfigError as exc:
            return [p.message for p in exc.problems]
        return []

    assert problems([{"kind": "tmux"}, {"kind": "desktop", "events": ["waiting", "failed"]}]) == []
    assert problems([{"kind": "webhook"}]) == ["a webhook needs a url (https://HOST/PATH)"]
    assert problems([{"kind": "tmux", "url": "https://x/y"}]) == [
        "url is only for kind: webhook (this is kind: tmux)"]
    assert problems([{"kind": "desktop", "retry_s": 10}]) == [
        "retry_s is only for kind: webhook (this is kind: desktop)"]
    assert problems([{"kind": "webhook", "url": "https://h/x", "retry_s": 0, "timeout_s": 2}]) == []
    for url in (f"https://h:99999/{TOKEN}", f"https://h:port/{TOKEN}"):
        assert problems([{"kind": "webhook", "url": url}]) == [
            "the webhook url's port must be a number from 1 to 65535 (the url is not shown: it may hold a "
            "token)"]
    said = problems([{"kind": "webhook", "url": f"https://h/a b/{TOKEN}"}])
    assert len(said) == 1 and "write %20 for a space" in said[0] and TOKEN not in said[0]
    assert "Input should be" in problems([{"kind": "desktop", "events": ["soon"]}])[0]
    assert repr(NotifyTarget(kind="webhook", url=f"https://h/{TOKEN}")).count(TOKEN) == 0  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_desktop_without_notify_send_is_one_log_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import anyio

    monkeypatch.setenv("PATH", str(tmp_path))  # no notify-send here
    notifier = Notifier([NotifyTarget(kind="desktop")])
    caplog.set_level(logging.INFO, logger="batonpass")
    async with anyio.create_task_group() as tg:
        tg.start_soon(notifier.run)
        for tick in range(5):
            notifier.waiting("coder", "permission prompt")  # every look; one episode
            notifier.failed("r@t1", "r", "gone", "gave up")
            if tick == 2:
                notifier.waiting("coder", None)
        await until(lambda: any("notify-send is not installed" in r.getMessage() for r in caplog.records),
                    5, "the desktop place starting")
        tg.cancel_scope.cancel()
    lines = [r.getMessage() for r in caplog.records]
    assert sum("notify-send is not installed" in m for m in lines) == 1
    assert sum(m.startswith("notice      waiting") for m in lines) == 2
    assert sum(m.startswith("notice      failed") for m in lines) == 1


class Recording(Notifier):
    """A notifier whose notices are kept in a list instead of sent."""

    def __init__(self) -> None:
        super().__init__([NotifyTarget(kind="tmux")])
        self.notices: list[Notice] = []

    def _post(self, notice: Notice) -> None:
        self.notices.append(notice)


@pytest.mark.anyio
async def test_the_router_reports_a_failed_transform_and_a_stopped_loop_once_per_turn() -> None:
    from pipeline.engine.stages.route import PromptRouter
    from pipeline.plugin.events import Completion, Response
    from pipeline.plugin.manager import load_registries
    from tests.support import stages

    cfg = stages.config("""
version: 1
tiles:
  a: {pane: '%1', agent: shell}
  b: {pane: '%2', agent: shell}
routes:
  - {from: a, to: b}
settings: {max_hops: 2}
""")
    notifier = Recording()
    router = PromptRouter(cfg, stages.tiles(cfg), load_registries().transforms, notifier=notifier)

    async def broken(route: object, response: object, target: object = None) -> str:
        raise RuntimeError("the model is down")

    router.transform = broken  # type: ignore[method-assign]
    for _ in range(2):  # the same turn seen twice (two signals, a catch-up): one notice each
        await router.decide(Response(Completion("a", "t1", hop=0), "answer", "transcript"))
        await router.decide(Response(Completion("a", "t2", hop=2), "answer", "transcript"))
    assert [(n.event, n.handoff, n.tile) for n in notifier.notices] == [
        ("failed", "a->b@t1", "b"), ("max_hops", "a->b@t2", "a")]
    assert "the model is down" in notifier.notices[0].message


@pytest.mark.anyio
async def test_a_webhook_that_fails_twice_gets_the_notice_once_on_its_third_try(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import anyio

    webhook = WebhookReceiver(answers=[500, 500]).start()
    notifier = Notifier([NotifyTarget(kind="webhook", url=f"{webhook.url}/hooks/{TOKEN}")])  # type: ignore[arg-type]
    caplog.set_level(logging.DEBUG, logger="batonpass")
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(notifier.run)
            notifier.waiting("coder", "permission prompt")
            await until(lambda: webhook.delivered(), 30, "the notice, on its third try")
            for _ in range(3):  # looked at again: the same episode
                notifier.waiting("coder", "permission prompt")
            notifier.failed("r@t1", "r", "gone", "gave up")  # the next notice goes through at once
            await until(lambda: webhook.delivered("failed"), 30, "the failed hand-off's notice")
            await aquiet_for(1.5, "a fourth POST of the waiting notice")
            tg.cancel_scope.cancel()
    finally:
        webhook.stop()
    answered = [(p.body["event"], p.answered) for p in webhook.requests]
    assert answered == [("waiting", 500), ("waiting", 500), ("waiting", 200), ("failed", 200)], answered
    assert len({json.dumps(b, sort_keys=True) for b in webhook.events("waiting")}) == 1  # one notice, 3 tries
    assert "got through at try 3" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert TOKEN not in caplog.text


@pytest.mark.anyio
async def test_a_notice_that_finally_fails_is_logged_once_and_a_4xx_is_not_tried_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import anyio

    broken = WebhookReceiver(status=503).start()
    refused = WebhookReceiver(status=404).start()
    notifier = Notifier([
        NotifyTarget(kind="webhook", url=f"{broken.url}/{TOKEN}", retry_s=2.5),  # type: ignore[arg-type]
        NotifyTarget(kind="webhook", url=f"{refused.url}/{DOWN_TOKEN}"),  # type: ignore[arg-type]
    ])
    caplog.set_level(logging.INFO, logger="batonpass")

    def given_up() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(notifier.run)
            notifier.waiting("coder", "permission prompt")
            await until(lambda: len(given_up()) == 2, 30, "both places giving up")
            tg.cancel_scope.cancel()
    finally:
        broken.stop()
        refused.stop()
    # tries at 0 s, 1 s, then 2.5 s (the wait cut to what retry_s leaves); the 404 once
    assert [p.answered for p in broken.requests] == [503, 503, 503]
    assert [p.answered for p in refused.requests] == [404]
    lines = given_up()
    assert sum(line.startswith(f"notice to webhook http://127.0.0.1:{broken.port}/… failed: the server "
                               "answered HTTP 503 (3 tries over ") for line in lines) == 1, lines
    assert sum(line.startswith(f"notice to webhook http://127.0.0.1:{refused.port}/… failed: the server "
                               "answered HTTP 404; ") for line in lines) == 1, lines
    assert TOKEN not in caplog.text and DOWN_TOKEN not in caplog.text


def test_a_reload_carries_waiting_episodes_only_for_tiles_that_stay_and_until_a_look_confirms_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pipeline.engine import notify

    notifier = Recording()
    for tile in ("coder", "reviewer", "gone", "exited"):
        notifier.waiting(tile, "permission prompt")
    assert len(notifier.notices) == 4
    notifier.reload([NotifyTarget(kind="tmux")], None, ["coder", "reviewer", "exited"])
    notifier.waiting("coder", "dialog open")  # the new pipeline's first look: the same episode
    notifier.waiting("reviewer", None)  # it stopped waiting during the reload
    notifier.waiting("gone", "permission prompt")  # a tile that left the config and came back: news
    assert [n.tile for n in notifier.notices[4:]] == ["gone"]
    monkeypatch.setattr(notify, "CARRY_S", -1.0)  # nobody looked at "exited" in time: its episode is over
    notifier.reload([NotifyTarget(kind="tmux")], None, ["coder", "exited"])
    notifier.waiting("exited", "permission prompt")
    notifier.waiting("coder", "permission prompt")  # its first look came too late as well: news again
    assert [n.tile for n in notifier.notices[5:]] == ["exited", "coder"]


@pytest.mark.anyio
async def test_a_desktop_notifier_that_hangs_or_fails_is_one_clear_log_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import anyio

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "notify-send"
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    caplog.set_level(logging.INFO, logger="batonpass")
    for body, needle in (
        ("import time; time.sleep(30)", "notify-send did not finish within 0.5s (timeout_s)"),
        ("import sys; sys.exit('no D-Bus session')", "notify-send exited with status 1: no D-Bus session"),
    ):
        script.write_text(f"#!{sys.executable}\n{body}\n")
        script.chmod(0o755)
        caplog.clear()
        notifier = Notifier([NotifyTarget(kind="desktop", timeout_s=0.5)])
        async with anyio.create_task_group() as tg:
            tg.start_soon(notifier.run)
            notifier.waiting("coder", "permission prompt")
            await until(lambda: any(r.levelno == logging.WARNING for r in caplog.records), 30, "the warning")
            tg.cancel_scope.cancel()
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warnings == [f"notice to desktop failed: {needle}; further failures are not logged until one "
                            "gets through"], warnings


@pytest.mark.anyio
async def test_a_notice_still_being_tried_when_batonpass_stops_is_said_to_be_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import anyio

    webhook = WebhookReceiver(status=502).start()
    notifier = Notifier([NotifyTarget(kind="webhook", url=f"{webhook.url}/{TOKEN}")])  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, logger="batonpass")
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(notifier.run)
            notifier.failed("r@t1", "r", "gone", "gave up")
            await until(lambda: len(webhook.requests) == 2, 30, "the notice tried twice")
            tg.cancel_scope.cancel()  # as `baton run` stopping
    finally:
        webhook.stop()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"notice to webhook http://127.0.0.1:{webhook.port}/… not sent (failed about gone): "
                        "batonpass stopped while it was being tried again (the server answered HTTP 502)"]
    assert TOKEN not in caplog.text
