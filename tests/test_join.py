"""A join route's groups on the stages without tmux: which answers form a group (the hop chain's upstream
turn, or arrival for a person's turns), what the one hand-off holds, ``any``/N, ``within:`` and
``on_timeout``, and a restart at each durable step (docs/workflows.md#two-reviewers-one-verdict-join)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import anyio
import pytest

from pipeline.engine.hops import HopLedger
from pipeline.engine.join_journal import JoinBook, joining_by_target
from pipeline.engine.journal import MEMORY, Journal
from pipeline.engine.stages.route import PromptRouter
from pipeline.plugin.events import Prompt, Response
from pipeline.plugin.manager import load_registries
from tests.support.stages import completion, config, tiles

pytestmark = pytest.mark.anyio

ROUTES = """
version: 1
settings: {max_hops: 5}
tiles:
  coder: {pane: '%1', agent: shell}
  security: {pane: '%2', agent: shell}
  style: {pane: '%3', agent: shell}
  docs: {pane: '%4', agent: shell}
routes:
  - name: review
    from: coder
    to: [security, style]
  - name: verdicts
    from: [security, style]
    JOIN
    to: coder
    transform: {type: template, template: "The reviews:\\n\\n{responses}\\n--\\n{answers[security]}"}
"""


def router(journal: Journal, join: str = "") -> PromptRouter:
    cfg = config(ROUTES.replace("JOIN", join or "join: all"))
    return PromptRouter(cfg, tiles(cfg), load_registries().transforms, journal=journal)


def handed(journal: Journal, tile: str, upstream: str, hop: int) -> None:
    """As the dispatcher does when it types a prompt of ``upstream``'s turn (``coder:X``) into ``tile``."""
    source, turn = upstream.split(":")
    HopLedger(journal).expect(tile, hop, f"{source}:{turn}")


async def answer(r: PromptRouter, tile: str, turn: str, text: str) -> list[Prompt]:
    """``tile`` finished ``turn`` with ``text``: the detector takes its hop and origin, the router joins."""
    hop = HopLedger(r.journal).take(tile, turn)
    assert r.joins is not None
    return await r.joins.take(Response(completion(tile, turn, hop=hop), text, "transcript"))


async def test_both_reviewers_of_one_coder_turn_join_into_one_prompt_in_the_order_of_from() -> None:
    journal = Journal(MEMORY)
    r = router(journal)
    handed(journal, "security", "coder:X", 2)
    handed(journal, "style", "coder:X", 3)
    assert await answer(r, "style", "s1", "style: fine") == []  # style first: the group waits for security
    [prompt] = await answer(r, "security", "q1", "security: no injection")
    assert prompt.text == ("The reviews:\n\n## security\n\nsecurity: no injection\n\n## style\n\nstyle: fine"
                           "\n--\nsecurity: no injection")
    assert (prompt.key, prompt.target, prompt.source, prompt.hop) == (
        "verdicts@coder:X", "coder", "security,style", 4)  # one more than the highest of its sources
    record = journal.handoff("verdicts@coder:X")
    assert record is not None and record.state == "transformed"


async def test_a_late_answer_to_an_older_turn_never_joins_a_newer_group() -> None:
    journal = Journal(MEMORY)
    r = router(journal)
    for turn in ("X", "Y"):  # the coder answered twice; each answer fanned out to both reviewers
        handed(journal, "security", f"coder:{turn}", 1)
        handed(journal, "style", f"coder:{turn}", 1)
    assert await answer(r, "security", "q1", "sec on X") == []
    assert await answer(r, "security", "q2", "sec on Y") == []
    assert await answer(r, "style", "s1", "style on X") != []  # X's group: both answers to X
    [y] = await answer(r, "style", "s2", "style on Y")
    assert "sec on Y" in y.text and "style on Y" in y.text and "on X" not in y.text
    assert y.key == "verdicts@coder:Y"


async def test_a_source_answering_twice_within_a_group_gives_its_last_answer() -> None:
    journal = Journal(MEMORY)
    r = router(journal)
    handed(journal, "security", "coder:X", 1)
    handed(journal, "security", "coder:X", 1)  # two hand-offs of the same coder turn to security
    handed(journal, "style", "coder:X", 1)
    assert await answer(r, "security", "q1", "first look") == []
    assert await answer(r, "security", "q2", "second look") == []
    [prompt] = await answer(r, "style", "s1", "fine")
    assert "second look" in prompt.text and "first look" not in prompt.text


async def test_turns_a_person_started_join_by_arrival() -> None:
    journal = Journal(MEMORY)
    r = router(journal)
    assert await answer(r, "security", "p1", "typed by a person") == []
    assert await answer(r, "security", "p2", "typed again") == []  # its last answer counts
    [first] = await answer(r, "style", "p3", "style's own")
    assert first.key == "verdicts@arrival:security:p1"
    assert "typed again" in first.text and "typed by a person" not in first.text
    assert await answer(r, "style", "p4", "next one") == []  # the next group: style's next turn
    [second] = await answer(r, "security", "p5", "and security's")
    assert second.key == "verdicts@arrival:style:p4"


async def test_any_hands_on_at_the_first_answer_and_records_the_later_ones() -> None:
    journal = Journal(MEMORY)
    r = router(journal, "join: any")
    handed(journal, "security", "coder:X", 1)
    handed(journal, "style", "coder:X", 1)
    [prompt] = await answer(r, "style", "s1", "style: fine")
    assert "## style" in prompt.text and "## security" not in prompt.text
    assert await answer(r, "security", "q1", "security: late") == []  # recorded, not handed on again
    assert JoinBook(journal).late("verdicts", "coder:X") == [("security", "q1")]


async def test_a_number_hands_on_after_that_many_sources() -> None:
    text = ROUTES.replace("from: [security, style]", "from: [security, style, docs]")
    text = text.replace("JOIN", "join: 2")
    cfg = config(text)
    journal = Journal(MEMORY)
    r = PromptRouter(cfg, tiles(cfg), load_registries().transforms, journal=journal)
    for tile in ("security", "style", "docs"):
        handed(journal, tile, "coder:X", 1)
    assert await answer(r, "docs", "d1", "docs ok") == []
    [prompt] = await answer(r, "security", "q1", "sec ok")
    assert "## docs" in prompt.text and "## style" not in prompt.text
    assert await answer(r, "style", "s1", "style ok") == []


async def test_the_same_turn_twice_joins_once() -> None:
    journal = Journal(MEMORY)
    r = router(journal)
    handed(journal, "security", "coder:X", 1)
    handed(journal, "style", "coder:X", 1)
    assert await answer(r, "security", "q1", "sec") == []
    assert await answer(r, "security", "q1", "sec") == []  # reported again (a restart's catch-up)
    assert len(await answer(r, "style", "s1", "style")) == 1
    assert await answer(r, "style", "s1", "style") == []


async def test_history_rows_and_board_show_a_joining_group_on_its_target() -> None:
    from pipeline.commands.history import history_rows
    from pipeline.engine.journal import HistoryFilter

    journal = Journal(MEMORY)
    r = router(journal)
    handed(journal, "security", "coder:X", 1)
    await answer(r, "security", "q1", "sec")
    [row] = [row for row in history_rows(journal, 10, HistoryFilter()) if row["key"] == "verdicts@coder:X"]
    assert (row["state"], row["joining"], row["target"]) == ("joining", "1 of 2: security", "coder")
    assert row["group"]["missing"] == ["style"]
    from pipeline.views.handoff_table import handoff_table

    assert "joining (1 of 2: security)" in handoff_table([row])
    assert joining_by_target(journal.db) == {"coder": ["verdicts: 1 of 2 (security)"]}
    assert history_rows(journal, 10, HistoryFilter(tile="security"))  # a source's group shows too


async def _run_until(r: PromptRouter, want: int) -> list[Prompt]:
    """The join stage's own task (its deadlines, the groups a restart found complete) until ``want``
    prompts came out of it."""
    assert r.joins is not None
    send, receive = anyio.create_memory_object_stream[Prompt](16)
    got: list[Prompt] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(r.joins.run, send)
            while len(got) < want:
                got.append(await receive.receive())
            tg.cancel_scope.cancel()
    return got


def _pass_deadlines(path: Path) -> None:
    """As if the daemon had been down past the groups' ``within:``."""
    db = sqlite3.connect(path)
    db.execute("UPDATE join_groups SET deadline = ?", (time.time() - 1,))
    db.commit()
    db.close()


async def test_within_passed_while_down_hands_on_what_came_saying_who_did_not_answer(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    first = router(Journal(path), "join: all\n    within: 30m")
    handed(first.journal, "security", "coder:X", 1)
    await answer(first, "security", "q1", "sec ok")
    first.journal.close()
    _pass_deadlines(path)
    restarted = router(Journal(path), "join: all\n    within: 30m")
    [prompt] = await _run_until(restarted, 1)
    assert "## security\n\nsec ok" in prompt.text
    assert "## style\n\n(style did not answer within 30m)" in prompt.text
    assert "(style did not answer)" not in prompt.text  # {answers[security]} is there
    assert await answer(restarted, "style", "s1", "too late") == []  # recorded, not handed on again


async def test_within_passed_with_drop_records_the_hand_off_dropped(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    join = "join: all\n    within: 2h\n    on_timeout: drop"
    first = router(Journal(path), join)
    handed(first.journal, "style", "coder:X", 1)
    await answer(first, "style", "s1", "style ok")
    first.journal.close()
    _pass_deadlines(path)
    restarted = router(Journal(path), join)
    assert restarted.joins is not None
    send, receive = anyio.create_memory_object_stream[Prompt](16)
    with anyio.move_on_after(0.5):  # nothing comes out; the journal says why
        await restarted.joins.run(send)
    assert receive.statistics().current_buffer_used == 0
    record = restarted.journal.handoff("verdicts@coder:X")
    assert record is not None and record.state == "skipped"
    assert record.note == "dropped: within 2h passed; security did not answer"


async def test_a_restart_with_one_answer_in_completes_the_group_once(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    first = router(Journal(path))
    handed(first.journal, "security", "coder:X", 1)
    handed(first.journal, "style", "coder:X", 1)
    await answer(first, "security", "q1", "sec ok")
    first.journal.close()  # killed with one answer in
    restarted = router(Journal(path))
    [prompt] = await answer(restarted, "style", "s1", "style ok")
    assert "sec ok" in prompt.text and "style ok" in prompt.text
    assert await answer(restarted, "security", "q1", "sec ok") == []  # the catch-up reports it again


async def test_a_group_complete_when_the_daemon_died_is_handed_on_once_after_the_restart(
        tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    journal = Journal(path)
    handed(journal, "security", "coder:X", 1)
    handed(journal, "style", "coder:X", 1)
    book = JoinBook(journal)
    for tile, turn in (("security", "q1"), ("style", "s1")):  # the answers went in; then it died
        hop, origin = HopLedger(journal).take_with_origin(tile, turn)
        book.add_answer("verdicts", "coder", ["security", "style"], 2, None, origin, (tile, turn, hop, tile))
    journal.close()
    restarted = router(Journal(path))
    [prompt] = await _run_until(restarted, 1)
    assert prompt.key == "verdicts@coder:X"
    again = router(Journal(path))  # and once more: handed on already, nothing comes out
    assert again.joins is not None
    send, receive = anyio.create_memory_object_stream[Prompt](16)
    with anyio.move_on_after(0.3):
        await again.joins.run(send)
    assert receive.statistics().current_buffer_used == 0
