"""The journal on its own: states, dedup across restarts, hops, history, file modes."""

from __future__ import annotations

import stat
from pathlib import Path

from pipeline.engine.journal import MEMORY, Journal
from pipeline.plugin.events import Completion, Prompt


def completion(turn: str = "t1", hop: int = 0, at: float | None = None) -> Completion:
    return (
        Completion(tile="a", turn_id=turn, hop=hop)
        if at is None
        else Completion(tile="a", turn_id=turn, hop=hop, at=at)
    )


def routed(j: Journal, turn: str) -> bool:
    seen = j.seen_completion("a", turn)
    return seen is not None and seen[1]


def test_routing_is_recorded_with_the_completion(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite3")
    c = completion()
    j.record_completion(c)
    assert not routed(j, "t1")
    p = Prompt(route="r", source="a", target="b", text="hello", turn_id="t1", hop=1)
    j.record_routing(c, [(p, "r", "b", "transformed", ""), (None, "r2", "c", "skipped", "no match")])
    assert routed(j, "t1")
    rec = j.handoff("r@t1")
    assert (rec.state, rec.prompt, rec.hop, rec.attempts) == ("transformed", "hello", 1, 0)
    assert j.handoff("r2@t1").note == "no match"
    assert [r.key for r in j.unfinished()] == ["r@t1"]


def test_states_attempts_and_history(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite3")
    c = completion()
    j.record_completion(c)
    p = Prompt(route="r", source="a", target="b", text="hello", turn_id="t1", hop=1)
    j.record_routing(c, [(p, "r", "b", "transformed", "")])
    j.set_state("r@t1", "delivering", attempt=True)
    assert j.unfinished()[0].state == "delivering"
    j.set_state("r@t1", "failed", error="pane %9 is gone")
    rec = j.handoff("r@t1")
    assert (rec.state, rec.attempts, rec.last_error) == ("failed", 1, "pane %9 is gone")
    assert j.unfinished() == []
    assert [h.key for h in j.history()] == ["r@t1"]


def test_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    j = Journal(path)
    c = completion()
    j.record_completion(c)
    j.record_routing(c, [])
    j.push_hop("b", 2)
    j.close()
    j = Journal(path)
    assert routed(j, "t1")
    assert j.pop_hop("b") == 2 and j.pop_hop("b") is None


def test_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "state" / "batonpass" / "journal.sqlite3"
    Journal(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_pending_before_the_transform_then_its_outcome(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite3")
    c = completion()
    j.record_completion(c)
    j.record_pending(c, [("r", "b"), ("r2", "c")])
    assert {h.key: h.state for h in j.history()} == {"r@t1": "pending", "r2@t1": "pending"}
    assert not routed(j, "t1")  # a crash now: the turn is reported again and redone
    p = Prompt(route="r", source="a", target="b", text="hi", turn_id="t1", hop=1)
    j.record_routing(
        c,
        [(p, "r", "b", "transformed", "fell back to raw: no key"), (None, "r2", "c", "skipped", "no match")],
    )
    states = {h.key: (h.state, h.note) for h in j.history()}
    assert states == {"r@t1": ("transformed", "fell back to raw: no key"), "r2@t1": ("skipped", "no match")}
    j.set_state("r@t1", "delivered")
    j.record_routing(c, [(p, "r", "b", "transformed", "")])  # a repeat never rewinds a final state
    assert j.handoff("r@t1").state == "delivered"


def test_prune_forgets_only_old_finished_records(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.sqlite3")
    for turn, state in (("old", "delivered"), ("old-open", "transformed"), ("new", "delivered")):
        c = completion(turn)
        j.record_completion(c)
        j.record_routing(c, [(Prompt(route="r", source="a", target="b", text="x", turn_id=turn, hop=1),
                              "r", "b", "transformed", "")])
        j.set_state(f"r@{turn}", state)
    j.db.execute("UPDATE handoffs SET updated = updated - 40 * 86400 WHERE turn_id LIKE 'old%'")
    j.db.execute("UPDATE completions SET seen = seen - 40 * 86400 WHERE turn_id LIKE 'old%'")
    assert j.prune() == {"hand-off": 1, "completion": 2}  # the open one's turn was routed
    assert sorted(h.turn_id for h in j.history()) == ["new", "old-open"]  # an unfinished one is kept
    assert not routed(j, "old") and routed(j, "new")


def test_followed_until_marks_only_move_forward_and_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    j = Journal(path)
    assert j.followed_until("a") is None  # no run followed it: its past is history
    j.mark_followed(["a", "b"], 100.0)
    j.mark_followed(["a"], 50.0)  # a lagging mark never moves one back
    j.close()
    j = Journal(path)
    assert (j.followed_until("a"), j.followed_until("b")) == (100.0, 100.0)


def test_a_memory_journal_keeps_state_for_its_own_life_only(tmp_path: Path) -> None:
    j = Journal(MEMORY)
    j.push_hop("b", 3)
    j.mark_followed(["a"], 1.0)
    assert j.pop_hop("b") == 3 and j.followed_until("a") == 1.0
    assert Journal(MEMORY).followed_until("a") is None
    assert list(tmp_path.iterdir()) == [] and not Path(MEMORY).exists()
