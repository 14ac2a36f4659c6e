"""Never lose, never repeat: loops, crashes, restarts, live reload and broken targets — on real tmux.

The daemon runs as a real `baton run` subprocess and is killed with SIGKILL at random moments; the
journal in the test's own XDG_STATE_HOME carries the hand-offs across restarts. Every test counts what
the target agent actually received (its own log), so "lost" and "repeated" are measured, not assumed.
Set BATON_FAULT_TURNS (default 10) for a longer run.
"""

from __future__ import annotations

import collections
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.engine.journal import Journal, default_journal_path
from tests.support.agents import messages, read_log, start_agent, transcript_answers
from tests.support.cli import json_lines
from tests.support.daemons import wait_followed, write_config
from tests.support.polling import quiet_for, wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]


def test_loop_between_two_agents_stops_at_max_hops(
    tmux_server: TmuxServer, tmp_path: Path, daemon_factory
) -> None:
    alog, blog = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a, b = start_agent(tmux_server, alog, "a", work_s=0.2), start_agent(tmux_server, blog, "b", work_s=0.2)
    config = write_config(
        tmp_path / "routes.yaml",
        tmux_server.socket,
        {"a": {"pane": a, "agent": "demo"}, "b": {"pane": b, "agent": "demo"}},
        [
            {"from": "a", "to": "b", "transform": {"type": "template", "template": "{response} +b"}},
            {"from": "b", "to": "a", "transform": {"type": "template", "template": "{response} +a"}},
        ],
        max_hops=3,
    )
    daemon = daemon_factory(config)
    daemon.start()
    daemon.wait_running()
    tmux_server.type(a, "seed")  # a person's prompt: hop 0
    wait_for(lambda: len(messages(blog)) == 2 and len(messages(alog)) == 2, timeout=30, what="the loop")
    quiet_for(2.0, "a hand-off past max_hops")
    assert daemon.stop() == 0
    assert messages(alog) == ["seed", "seed +b +a"]
    assert messages(blog) == ["seed +b", "seed +b +a +b"]
    history = Journal(default_journal_path()).history()
    assert [h.state for h in history] == ["delivered", "delivered", "delivered", "skipped"]
    assert history[-1].note == "the chain reached max_hops=3"
    # a person's prompt resets the count
    out = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "history", "--json"], capture_output=True, text=True
    )
    assert [h["hop"] for h in json_lines(out.stdout)] == [1, 2, 3, 4]


def test_sigkill_at_random_moments_loses_and_repeats_nothing(tmux_server: TmuxServer, tmp_path: Path,
                                                              private_state: Path, daemon_factory) -> None:
    turns = int(os.environ.get("BATON_FAULT_TURNS", "10"))
    rng = random.Random(int(os.environ.get("BATON_FAULT_SEED", "7")))
    alog, blog = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a = start_agent(tmux_server, alog, "a", role="writer", work_s=0.25)
    b = start_agent(tmux_server, blog, "b", work_s=0.25)
    config = write_config(
        tmp_path / "routes.yaml",
        tmux_server.socket,
        {"a": {"pane": a, "agent": "demo"}, "b": {"pane": b, "agent": "demo"}},
        [{"from": "a", "to": "b", "transform": {"type": "template", "template": "from a: {response}"}}],
    )
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "a")  # the first run: what a did before is history, what it does next is news
    next_kill = time.monotonic() + rng.uniform(0.3, 2.0)
    for i in range(turns):
        # a person types the next task once a has answered the last one
        wait_for(
            lambda i=i: (
                len(transcript_answers(private_state)) >= i
                and "demo❯ " in tmux_server.capture(a).rstrip().split("\n")[-1] + " "
            ),
            timeout=30,
            what=f"a to finish turn {i}",
        )
        tmux_server.type(a, f"task {i}")
        while time.monotonic() < next_kill and len(transcript_answers(private_state)) <= i:
            time.sleep(0.02)  # shapes the scenario: polls until the kill moment or a's answer, if sooner
        if time.monotonic() >= next_kill:
            daemon.kill()
            time.sleep(rng.uniform(0.0, 0.8))  # shapes the scenario: down for a while, turns may finish
            daemon.start()
            next_kill = time.monotonic() + rng.uniform(0.3, 2.0)
    wait_for(lambda: len(transcript_answers(private_state)) >= turns, timeout=30, what="a's last answer")
    expected = [f"from a: {t}" for t in transcript_answers(private_state) if t.startswith("Draft")]
    wait_for(
        lambda: len(messages(blog)) >= len(expected), timeout=60 + turns, what="every hand-off to arrive"
    )
    quiet_for(1.5, "a repeated hand-off")
    assert daemon.stop() == 0
    got = collections.Counter(messages(blog))
    lost = [m for m in expected if got[m] == 0]
    repeated = {m: n for m, n in got.items() if n > 1}
    report = (
        f"turns={turns} kills={daemon.kills} starts={daemon.starts} lost={len(lost)} repeated={len(repeated)}"
    )
    print(report)
    (tmp_path / "fault-report.txt").write_text(report)
    assert lost == [] and repeated == {}, report + "\n" + daemon.stderr()[-4000:]
    assert [r for r in read_log(blog) if r.get("event") == "input-while-busy"] == []
    assert daemon.kills >= 2, "the run should have been killed a few times"


def test_turns_finished_while_down_are_caught_up_or_skipped_by_age(tmux_server: TmuxServer, tmp_path: Path,
                                                                  daemon_factory) -> None:
    """The first run ever records what is on disk as history (skipped); a later run hands off a turn that
    ended while it was down if it is younger than catch_up_s, and records an older one as skipped."""
    alog, blog = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a, b = start_agent(tmux_server, alog, "a", work_s=0.1), start_agent(tmux_server, blog, "b", work_s=0.1)
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                          {"a": {"pane": a, "agent": "demo"}, "b": {"pane": b, "agent": "demo"}},
                          [{"from": "a", "to": "b"}], catch_up_s=4)
    tmux_server.type(a, "before any run")  # on disk when batonpass first follows the tile
    wait_for(lambda: tmux_server.capture(a).count("before any run") >= 2)
    daemon = daemon_factory(config)
    daemon.start()
    wait_for(lambda: [h.state for h in Journal(default_journal_path()).history()] == ["skipped"],
             what="the first run's history recorded")
    assert daemon.stop() == 0
    tmux_server.type(a, "old turn")  # finishes long before the daemon starts again
    wait_for(lambda: "old turn" in tmux_server.capture(a).split("demo❯ old turn", 1)[-1])
    time.sleep(5)  # shapes the scenario: the old turn ages past catch_up_s=4
    tmux_server.type(a, "recent turn")
    wait_for(lambda: tmux_server.capture(a).count("recent turn") >= 2)
    daemon.start()
    wait_for(lambda: messages(blog), timeout=20, what="the catch-up hand-off")
    quiet_for(1.0, "a hand-off of the old turn")
    assert daemon.stop() == 0
    assert messages(blog) == ["recent turn"]
    notes = [(h.state, h.note) for h in Journal(default_journal_path()).history()]
    assert [s for s, _ in notes] == ["skipped", "skipped", "delivered"]
    assert notes[0][1].startswith("history:") and "catch_up_s=4" in notes[1][1]


def test_invalid_reload_keeps_running_config_and_valid_reload_applies(tmux_server: TmuxServer, tmp_path: Path,
                                                                      daemon_factory) -> None:
    alog, blog, clog = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    a = start_agent(tmux_server, alog, "a", work_s=0.1)
    b = start_agent(tmux_server, blog, "b", work_s=0.1)
    c = start_agent(tmux_server, clog, "c", work_s=0.1)
    tiles = {
        "a": {"pane": a, "agent": "demo"},
        "b": {"pane": b, "agent": "demo"},
        "c": {"pane": c, "agent": "demo"},
    }
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket, tiles, [{"from": "a", "to": "b"}])
    daemon = daemon_factory(config)
    daemon.start()
    daemon.wait_running()
    config.write_text("version: 1\ntiles:\n  a: {pane: '%1', agnt: demo}\n")  # broken: reported, ignored
    wait_for(lambda: "routes.yaml:3:19: error: tiles.a.agnt: unknown key 'agnt'" in daemon.stderr(),
             what="the reload error with its position")
    tmux_server.type(a, "one")
    wait_for(lambda: messages(blog) == ["one"], what="hand-off under the old config")
    write_config(config, tmux_server.socket, tiles, [{"from": "a", "to": "c"}])
    wait_for(lambda: "reloading" in daemon.stderr(), what="the reload")
    wait_for(lambda: daemon.stderr().count("running:") >= 2, what="the pipeline restarted on the new routes")
    tmux_server.type(a, "two")
    wait_for(lambda: messages(clog) == ["two"], what="hand-off under the new config")
    assert daemon.stop() == 0
    assert messages(blog) == ["one"]


def test_target_killed_mid_queue_and_tmux_server_restarted(tmux_server: TmuxServer, tmp_path: Path,
                                                           daemon_factory) -> None:
    """The target pane dies with prompts queued for it; the whole tmux server then dies and comes back
    (a new server on the same socket, the agent restarted under the same title). Nothing is typed into
    the wrong place, the failure is recorded with its reason, and the queue resumes once the target is
    back."""
    alog, blog = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a = start_agent(tmux_server, alog, "a", work_s=0.1)
    b = start_agent(tmux_server, blog, "b", work_s=3.0)
    tmux_server.run("select-pane", "-t", b, "-T", "target-b")
    config = write_config(
        tmp_path / "routes.yaml",
        tmux_server.socket,
        {"a": {"pane": a, "agent": "demo"}, "b": {"pane": "title:target-b", "agent": "demo"}},
        [{"from": "a", "to": "b"}],
        give_up_s=60,
    )
    daemon = daemon_factory(config)
    daemon.start()
    daemon.wait_running()
    for i in range(3):
        tmux_server.type(a, f"job {i}")
        wait_for(lambda i=i: tmux_server.capture(a).count(f"job {i}") >= 2, what=f"a answers job {i}")
    wait_for(lambda: messages(blog) == ["job 0"], what="b busy with job 0")
    tmux_server.run("kill-pane", "-t", b)  # jobs 1 and 2 are queued for b
    wait_for(lambda: "gone" in daemon.stderr(), what="the target reported gone")
    tmux_server.kill()  # the whole server
    time.sleep(1.5)  # shapes the scenario: the server stays away a while
    # a new server, a new agent in a pane with the same title
    blog2 = tmp_path / "b2.jsonl"
    b2 = start_agent(tmux_server, blog2, "b", work_s=0.1)
    tmux_server.run("select-pane", "-t", b2, "-T", "target-b")
    wait_for(lambda: len(messages(blog2)) == 2, timeout=60, what="the queued jobs delivered to the new pane")
    quiet_for(1.0, "a job delivered twice")
    assert daemon.stop() == 0
    assert messages(blog2) == ["job 1", "job 2"]


def test_agent_exits_between_completion_and_dispatch(
    tmux_server: TmuxServer, tmp_path: Path, daemon_factory
) -> None:
    a = start_agent(tmux_server, tmp_path / "a.jsonl", "a", work_s=0.1)
    bare = tmux_server.new_pane()  # b's pane: an agent that "exited" leaves a bare shell
    wait_for(lambda: "$" in tmux_server.capture(bare))
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                          {"a": {"pane": a, "agent": "demo"}, "b": {"pane": bare, "agent": "demo"}},
                          [{"from": "a", "to": "b"}], give_up_s=2)
    daemon = daemon_factory(config)
    daemon.start()
    daemon.wait_running()
    tmux_server.type(a, "echo should-never-run-in-bash")
    wait_for(lambda: "gave up" in daemon.stderr(), timeout=30, what="the hand-off to fail")
    assert daemon.stop() == 0
    assert "should-never-run-in-bash" not in tmux_server.capture(bare)
    (record,) = Journal(default_journal_path()).history()
    assert record.state == "failed" and "shows no demo agent" in record.last_error
    out = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "history"], capture_output=True, text=True
    ).stdout
    assert "failed" in out and "shows no demo agent" in out


def test_transcript_truncated_or_deleted_under_a_running_daemon(tmux_server: TmuxServer, tmp_path: Path,
                                                                private_state: Path, daemon_factory) -> None:
    alog, blog = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a = start_agent(tmux_server, alog, "a", work_s=0.1)
    b = start_agent(tmux_server, blog, "b", work_s=0.1)
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                          {"a": {"pane": a, "agent": "demo"}, "b": {"pane": b, "agent": "demo"}},
                          [{"from": "a", "to": "b"}])
    daemon = daemon_factory(config)
    daemon.start()
    daemon.wait_running()
    tmux_server.type(a, "first")
    wait_for(lambda: messages(blog) == ["first"], what="the first hand-off")
    a_pid = tmux_server.pane_pid(a)
    transcript = private_state / "batonpass" / "demo-agents" / f"{a_pid}.jsonl"
    assert transcript.exists()
    transcript.write_text("")  # truncated under the daemon
    tmux_server.type(a, "second")
    wait_for(lambda: messages(blog) == ["first", "second"], what="the hand-off after truncation")
    transcript.unlink()  # deleted; the agent writes a new one
    tmux_server.type(a, "third")
    wait_for(lambda: messages(blog) == ["first", "second", "third"], what="the hand-off after deletion")
    quiet_for(1.5, "a turn handed off again from the rewritten transcript")
    assert daemon.stop() == 0
    assert messages(blog) == ["first", "second", "third"]
    assert "Traceback" not in daemon.stderr()
