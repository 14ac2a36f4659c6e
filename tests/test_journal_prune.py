"""The journal forgets what finished more than 30 days ago — in every table, the join's too — and keeps what
is recent or still under way, whatever its age; in one transaction (a kill part-way forgets nothing); and a
running daemon prunes once a day, not only at its start."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from pipeline.engine.journal import Journal
from tests.support.journal import add_handoff
from tests.support.old_journal import FORGOTTEN, rows, seed
from tests.support.paths import REPO
from tests.support.polling import until

#: a child that opens the journal and prunes it, killing itself (SIGKILL) as SQLite starts its Nth
#: statement of the prune: the transaction's BEGIN is the first, its COMMIT the last
_KILLED_AT = textwrap.dedent("""
    import os, signal, sys
    from pipeline.engine.journal import Journal
    journal, at, started = Journal(sys.argv[1]), int(sys.argv[2]), []
    def trace(sql):
        started.append(sql)
        if len(started) == at:
            os.kill(os.getpid(), signal.SIGKILL)
    journal.db.set_trace_callback(trace)
    journal.prune()
    print(len(started))
""")


#: the statements a prune of a journal with every table starts: BEGIN, the journal's five DELETEs, the look
#: for the tables made later, their three DELETEs, the COMMIT
STATEMENTS = 11


def _prune_in_child(path: Path, killed_at: int = 0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _KILLED_AT, str(path), str(killed_at)], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_old_finished_records_of_every_table_go_and_the_rest_stays(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    journal = seed(path)
    before = rows(path)
    for table, gone in FORGOTTEN.items():
        assert gone <= before[table], (table, gone - before[table])  # the seed holds what must go
    said = journal.prune()
    assert rows(path) == {table: ids - FORGOTTEN.get(table, set()) for table, ids in before.items()}
    assert said == {"hand-off": 8, "completion": 14, "hop": 1, "action": 1, "gate": 1, "turn origin": 1,
                    "join answer": 4, "join group": 2}
    assert journal.prune() == {}  # nothing more to forget


def test_what_is_under_way_stays_whatever_its_age(tmp_path: Path) -> None:
    """A hand-off queued, awaiting a person or being typed, an open join group and a turn not routed yet
    are never forgotten, however old: the next start finishes them."""
    path = tmp_path / "journal.sqlite3"
    journal = seed(path)
    journal.prune(older_than_s=-1)  # everything is older than that
    left = rows(path)
    assert {"r@old-pending", "r@old-transformed", "r@old-awaiting", "r@old-held", "r@old-delivering"} <= \
        left["handoffs"]
    assert left["gates"] == {"r@old-awaiting", "r@new-awaiting"}  # still awaiting: their gates stay
    assert left["join_groups"] == {"coder:old-joining", "coder:old-complete", "coder:new-joining",
                                   "coder:new-complete"}
    assert {"coder:old-joining/style/0", "coder:old-complete/security/0"} <= left["join_answers"]
    assert {"a:old-unrouted", "c:old-unrouted"} <= left["completions"]
    assert left["turn_origins"] == {"c:old-unrouted", "c:new-unrouted"}  # taken again after a crash


@pytest.mark.parametrize("killed_at", range(1, STATEMENTS + 1))
def test_a_kill_during_the_prune_forgets_nothing(tmp_path: Path, killed_at: int) -> None:
    """SIGKILL as each of the prune's statements starts (BEGIN, each DELETE, the COMMIT): every row is
    still there after, and the next prune forgets exactly what it should."""
    path = tmp_path / "journal.sqlite3"
    seed(path).close()
    before = rows(path)
    killed = _prune_in_child(path, killed_at)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)
    assert rows(path) == before
    Journal(path).prune()
    assert rows(path) == {table: ids - FORGOTTEN.get(table, set()) for table, ids in before.items()}


def test_the_kills_cover_every_statement_of_the_prune(tmp_path: Path) -> None:
    """The kills above are at each statement a prune of a journal with every table starts: one more, and
    the sweep must grow with it."""
    path = tmp_path / "journal.sqlite3"
    seed(path).close()
    done = _prune_in_child(path)
    assert done.returncode == 0 and int(done.stdout) == STATEMENTS, (done.stdout, done.stderr)


@pytest.mark.anyio
async def test_a_running_daemon_prunes_again_each_interval(tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """``keep_pruned`` (the daemon's task) prunes after each interval: a hand-off that grew old while the
    daemon ran goes, and one line at info says what went."""
    journal = Journal(tmp_path / "journal.sqlite3")
    add_handoff(journal, "r", "a", "b", "t1", "delivered", ago_s=31 * 86400.0)
    add_handoff(journal, "r", "a", "b", "t2", "delivered", ago_s=29 * 86400.0)
    caplog.set_level(logging.INFO, logger="batonpass")
    async with anyio.create_task_group() as tg:
        tg.start_soon(journal.keep_pruned, 0.01)
        await until(lambda: journal.handoff("r@t1") is None, what="the old hand-off pruned")
        tg.cancel_scope.cancel()
    assert journal.handoff("r@t2") is not None
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("journal: forgot")]
    assert said == ["journal: forgot 1 hand-off finished more than 30 days ago"], said
