"""``baton run`` prunes its journal as it starts, on a real tmux server: what finished more than 30 days ago
goes — a join's finished groups too — and ``baton history`` still shows the last 30 days; killed right after
that prune's write, the journal holds exactly what must stay (and the next start runs from it)."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.engine.crash_points import COUNT_ENV, CRASH_ENV
from pipeline.engine.join_journal import JoinBook
from pipeline.engine.journal import Journal, default_journal_path
from tests.support.agents import start_agent
from tests.support.cli import baton, json_lines
from tests.support.daemons import Daemon, write_config
from tests.support.journal import add_handoff
from tests.support.old_journal import AGE_S, FORGOTTEN, RECENT_S, rows, seed
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]


def _config(tmux_server: TmuxServer, tmp_path: Path) -> Path:
    """Two demo agents, x handing off to y (the seeded records are of other tiles and routes)."""
    panes = {name: start_agent(tmux_server, tmp_path / f"{name}.jsonl", name) for name in ("x", "y")}
    return write_config(tmp_path / "routes.yaml", tmux_server.socket,
                        {name: {"pane": pane, "agent": "demo"} for name, pane in panes.items()},
                        [{"name": "xy", "from": "x", "to": "y"}])


def test_baton_run_forgets_what_finished_over_30_days_ago_and_history_keeps_the_rest(
        tmux_server: TmuxServer, tmp_path: Path, daemon_factory: Callable[[Path], Daemon]) -> None:
    config = _config(tmux_server, tmp_path)
    path = default_journal_path()
    journal = seed(path)  # builds the tables a join makes; then one more pair, read by baton history
    add_handoff(journal, "r", "a", "b", "month-ago", "delivered", ago_s=AGE_S)
    add_handoff(journal, "r", "a", "b", "weeks-ago", "delivered", ago_s=RECENT_S)
    journal.close()
    daemon = daemon_factory(config)
    daemon.start()
    daemon.wait_running()
    left = rows(path)
    assert not any(FORGOTTEN[table] & left[table] for table in FORGOTTEN), left
    assert {"coder:old-joining", "coder:old-complete"} <= left["join_groups"]  # still under way
    assert "journal: forgot 9 hand-offs, 14 completions, 1 hop, 1 action, 1 gate, 1 turn origin, " \
           "4 join answers, 2 join groups finished more than 30 days ago" in daemon.stderr()
    shown = {r["key"] for r in json_lines(baton("history", "--json", "-n", "500", "-c", str(config)).out)}
    assert "r@weeks-ago" in shown and "r@new-delivered" in shown and "r@month-ago" not in shown, shown
    assert daemon.stop() == 0
    journal = Journal(path)
    open_group = JoinBook(journal).group("verdicts", "coder:old-joining")
    journal.close()
    assert open_group is not None and open_group.state == "joining" and open_group.deadline is not None


def test_killed_right_after_the_prune_the_journal_holds_all_that_must_stay(
        tmux_server: TmuxServer, tmp_path: Path, daemon_factory: Callable[[Path], Daemon]) -> None:
    config = _config(tmux_server, tmp_path)
    path = default_journal_path()
    seed(path).close()
    before = rows(path)
    daemon = daemon_factory(config)
    writes = tmp_path / "writes.tsv"
    daemon.env = {CRASH_ENV: "1", COUNT_ENV: str(writes)}  # SIGKILL right after the first journal write
    daemon.start()
    assert daemon.proc is not None
    proc = daemon.proc
    wait_for(lambda: proc.poll() is not None, what="baton run killed after its first write")
    assert proc.returncode == -signal.SIGKILL, daemon.stderr()
    (label,) = [line.split("\t", 1)[1] for line in writes.read_text().splitlines()]
    assert label.startswith("delete handoffs") and "delete join_groups" in label, label  # the prune
    assert rows(path) == {table: ids - FORGOTTEN.get(table, set()) for table, ids in before.items()}
    daemon.env = {}
    daemon.start()  # and the next start goes on from there
    daemon.wait_running()
    assert daemon.stop() == 0

