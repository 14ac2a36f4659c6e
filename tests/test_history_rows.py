"""Which rows ``baton history`` shows, and in what order (issue #39, items 10, 11 and 12): time order by the
time WHEN shows, in the table, ``--json`` and ``--follow``; an action refused before it changed anything
only with ``--refused``; a failed hand-off's key in the table, as ``baton retry`` takes it. Through the real
``baton`` command, against a real journal file (docs/json.md is the contract)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from pipeline.engine.journal import Journal, default_journal_path
from tests.support.cli import baton, baton_read_by_head, json_lines
from tests.support.journal import add_handoff

ROUTES = ('version: 1\ntiles:\n  a: {pane: "%1", agent: shell}\n  b: {pane: "%2", agent: shell}\n'
          'routes:\n  - {name: ab, from: a, to: b}\n')


def _times(journal: Journal, key: str, created_ago: float, updated_ago: float) -> None:
    now = time.time()
    journal.db.execute("UPDATE handoffs SET created=?, updated=? WHERE key=?",
                       (now - created_ago, now - updated_ago, key))


def _action(journal: Journal, action_id: str, kind: str, target: str, ok: bool, created_ago: float,
            updated_ago: float) -> None:
    journal.start_action(action_id, kind, target, "cli", "here")
    journal.end_action(action_id, ok, "done" if ok else "nothing changed")
    now = time.time()
    journal.db.execute("UPDATE actions SET created=?, updated=? WHERE id=?",
                       (now - created_ago, now - updated_ago, action_id))


def test_rows_are_in_the_order_of_the_time_they_show_in_the_table_json_and_follow() -> None:
    """A hand-off made first and delivered last, one skipped in between, a hold that took a while: made in
    one order, changed in another. The rows were in the order they were made, under a WHEN that is when
    they last changed (``00:19:39`` above ``00:19:38``)."""
    j = Journal(default_journal_path())
    add_handoff(j, "ab", "a", "b", "slow", "delivered")
    _times(j, "ab@slow", created_ago=100, updated_ago=10)
    add_handoff(j, "ab", "a", "b", "quick", "skipped", "no match")
    _times(j, "ab@quick", created_ago=50, updated_ago=50)
    _action(j, "h1", "hold", "ab", True, created_ago=80, updated_ago=5)
    in_order = ["ab@quick", "ab@slow", "action:h1"]

    rows = json_lines(baton("history", "--json").out)
    assert [r["key"] for r in rows] == in_order
    assert [r["updated"] for r in rows] == sorted(r["updated"] for r in rows)
    table = baton("history").out.splitlines()[1:]
    when = [line[:19] for line in table]
    assert when == sorted(when) and "ab" in table[0] and "skipped" in table[0], table
    _, followed, _ = baton_read_by_head("history", "--follow", "--json", lines=3)
    assert [json.loads(line)["key"] for line in followed] == in_order
    assert [r["key"] for r in json_lines(baton("history", "--json", "-n", "2").out)] == in_order[1:]


def test_a_refusal_that_changed_nothing_is_not_history_unless_asked_for(tmp_path: Path) -> None:
    """``baton hold nosuch`` and ``baton retry nosuch`` were journaled as actions and pushed the real
    hand-offs out of ``-n``; ``--refused`` (or ``--outcome refused``) shows them."""
    (tmp_path / "routes.yaml").write_text(ROUTES)
    j = Journal(default_journal_path())
    add_handoff(j, "ab", "a", "b", "t1", "delivered", ago_s=60)
    baton("hold", "nosuch", cwd=tmp_path).one_line_error(1, "no route 'nosuch'")
    baton("retry", "nosuch", cwd=tmp_path).one_line_error(1, "no hand-off 'nosuch'")
    assert baton("hold", "ab", cwd=tmp_path).status == 0

    shown = json_lines(baton("history", "--json", cwd=tmp_path).out)
    assert [(r["route"], r["state"]) for r in shown] == [("ab", "delivered"), ("hold", "done")]
    latest = json_lines(baton("history", "--json", "-n", "1", cwd=tmp_path).out)
    assert [r["route"] for r in latest] == ["hold"]
    everything = json_lines(baton("history", "--json", "--refused", cwd=tmp_path).out)
    assert [(r["route"], r["state"]) for r in everything] == [
        ("ab", "delivered"), ("hold", "refused"), ("retry", "refused"), ("hold", "done")]
    refused = json_lines(baton("history", "--json", "--outcome", "refused", cwd=tmp_path).out)
    assert [(r["route"], r["target"]) for r in refused] == [("hold", "nosuch"), ("retry", "nosuch")]
    table = baton("history", cwd=tmp_path).out
    assert "nosuch" not in table and "delivered" in table
    _, followed, _ = baton_read_by_head("history", "--follow", "--json", lines=2)
    assert [json.loads(line)["state"] for line in followed] == ["delivered", "done"]


def test_history_route_takes_the_journals_own_names_without_a_warning(tmp_path: Path) -> None:
    """``--route send`` (``baton send``'s hand-offs) and an action's kind are no typos of a route."""
    (tmp_path / "routes.yaml").write_text(ROUTES)
    for name in ("send", "approve", "hold", "ab", "a->b"):
        result = baton("history", "--route", name, cwd=tmp_path)
        assert (result.status, result.err) == (0, ""), (name, result.err)
    baton("history", "--route", "abb", cwd=tmp_path).one_line_error(0, "routes.yaml has no route 'abb'")


def test_the_failed_table_shows_each_hand_offs_retry_with_its_key() -> None:
    """The README sends people to ``baton history --outcome failed`` for ``baton retry KEY``: the table
    showed no key."""
    j = Journal(default_journal_path())
    add_handoff(j, "ab", "a", "b", "4f1c9a7e-0b2d-4e8f-9a61-1d2c3b4a5f60", "failed", "transform failed: boom")
    add_handoff(j, "ab", "a", "b", "t2", "delivered")
    table = baton("history", "--outcome", "failed").out
    keys = re.findall(r"\(baton retry (\S+)\)$", table, re.MULTILINE)
    assert keys == [r["key"] for r in json_lines(baton("history", "--json", "--outcome", "failed").out)]
    assert keys == ["ab@4f1c9a7e-0b2d-4e8f-9a61-1d2c3b4a5f60"] and "transform failed: boom" in table
    assert "baton retry" not in baton("history", "--outcome", "delivered").out
