"""A join on real tmux: the coder's answer fans out to two reviewer tiles (demo agents), and the join types
ONE prompt holding both verdicts into the coder — also when ``baton run`` is killed with one verdict in and
started again (the journal keeps the group)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.engine.journal import default_journal_path
from tests.support.agents import messages, start_agent
from tests.support.cli import json_lines
from tests.support.daemons import wait_followed, write_config
from tests.support.polling import quiet_for, wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

JOINED = "The reviews:\n\n## security\n\nreview: change X\n\n## style\n\nreview: change X"


def _setup(tmux_server: TmuxServer, tmp_path: Path, style_work_s: float) -> tuple[Path, dict[str, Path]]:
    logs = {name: tmp_path / f"{name}.jsonl" for name in ("coder", "security", "style")}
    panes = {"coder": start_agent(tmux_server, logs["coder"], "coder", work_s=0.2),
             "security": start_agent(tmux_server, logs["security"], "security", work_s=0.2),
             "style": start_agent(tmux_server, logs["style"], "style", work_s=style_work_s)}
    config = write_config(
        tmp_path / "routes.yaml", tmux_server.socket,
        {name: {"pane": pane, "agent": "demo"} for name, pane in panes.items()},
        [{"name": "review", "from": "coder", "to": ["security", "style"],
          "transform": {"type": "template", "template": "review: {response}"}},
         {"name": "verdicts", "from": ["security", "style"], "to": "coder",
          "transform": {"type": "template", "template": "The reviews:\n\n{responses}"}}],
        max_hops=2)  # the coder's answer to the verdicts (hop 2) goes no further
    return config, logs


def _answers_in(group: str) -> list[str]:
    db = sqlite3.connect(default_journal_path())
    try:
        return [s for (s,) in db.execute("SELECT source FROM join_answers WHERE grp=? ORDER BY source",
                                         (group,))]
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


def _baton(*args: str, config: Path) -> str:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args, "-c", str(config)],
                          capture_output=True, text=True, check=False).stdout


def test_two_reviewers_answer_and_the_coder_gets_one_prompt_with_both(
        tmux_server: TmuxServer, tmp_path: Path, daemon_factory) -> None:
    config, logs = _setup(tmux_server, tmp_path, style_work_s=0.2)
    daemon = daemon_factory(config)
    daemon.start()
    for tile in ("coder", "security", "style"):
        wait_followed(daemon, tile)
    tmux_server.type(_pane(config, "coder"), "change X")
    wait_for(lambda: len(messages(logs["coder"])) == 2, timeout=30, what="the joined prompt")
    quiet_for(2.0, "a second joined prompt")
    assert daemon.stop() == 0
    assert messages(logs["coder"]) == ["change X", JOINED]
    assert messages(logs["security"]) == messages(logs["style"]) == ["review: change X"]
    rows = [r for r in json_lines(_baton("history", "--json", config=config)) if r["route"] == "verdicts"]
    assert [(r["state"], r["hop"], r["source"]) for r in rows] == [("delivered", 2, "security,style")]


def test_killed_with_one_verdict_in_the_restart_completes_the_group_once(
        tmux_server: TmuxServer, tmp_path: Path, daemon_factory) -> None:
    config, logs = _setup(tmux_server, tmp_path, style_work_s=6.0)  # style is still working at the kill
    daemon = daemon_factory(config)
    daemon.start()
    for tile in ("coder", "security", "style"):
        wait_followed(daemon, tile)
    tmux_server.type(_pane(config, "coder"), "change X")
    wait_for(lambda: len(messages(logs["style"])) == 1, timeout=30, what="style handed the change")
    group = f"coder:{_coder_turn()}"
    wait_for(lambda: _answers_in(group) == ["security"], timeout=30, what="security's verdict joined")
    assert "joining (1 of 2: security)" in _baton("history", config=config)
    [coder] = [r for r in _status_rows(config) if r["tile"] == "coder"]
    assert coder["joining"] == ["verdicts: 1 of 2 (security)"]
    daemon.kill()  # one verdict in, the other still coming
    daemon.start()
    wait_for(lambda: len(messages(logs["coder"])) == 2, timeout=40, what="the joined prompt, restarted")
    quiet_for(2.0, "a second joined prompt")
    assert daemon.stop() == 0
    assert messages(logs["coder"]) == ["change X", JOINED]
    assert messages(logs["security"]) == messages(logs["style"]) == ["review: change X"]


def _pane(config: Path, tile: str) -> str:
    return str(json.loads(config.read_text())["tiles"][tile]["pane"])


def _coder_turn() -> str:
    db = sqlite3.connect(default_journal_path())
    try:
        (turn,) = db.execute("SELECT turn_id FROM completions WHERE tile='coder'").fetchone()
        return str(turn)
    finally:
        db.close()


def _status_rows(config: Path) -> list[dict]:
    return list(json.loads(_baton("status", "--json", config=config)))
