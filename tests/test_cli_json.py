"""``--json`` on every read command, parsed; ``baton history``'s filters and ``--follow`` — all through the
real ``baton`` command, against a real journal file and a real tmux pane (docs/json.md is the contract)."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline.engine.journal import Journal, default_journal_path
from tests.support.agents import start_agent, transcript_answers
from tests.support.cli import baton, baton_read_by_head, json_lines
from tests.support.daemons import write_config
from tests.support.follower import Follower, ctrl_c_as_in_a_terminal
from tests.support.journal import add_handoff
from tests.support.paths import FIXTURES
from tests.support.polling import quiet_for, wait_for
from tests.support.tmux import TmuxServer

#: the fields of one ``history --json`` line (docs/json.md)
HISTORY_FIELDS = {"key", "route", "source", "target", "turn_id", "hop", "state", "response", "prompt",
                  "attempts", "last_error", "note", "pane", "created", "updated", "usage", "gate"}


@pytest.fixture
def journal() -> Journal:
    j = Journal(default_journal_path())
    add_handoff(j, "a->b", "a", "b", "t1", "delivered", ago_s=3 * 3600)
    add_handoff(j, "b->a", "b", "a", "t2", "delivered", ago_s=1800)
    add_handoff(j, "a->b", "a", "b", "t3", "skipped", "the chain reached max_hops=6")
    add_handoff(j, "review", "a", "c", "t3", "failed", "transform ai-routing failed: boom")
    return j


def keys(*args: str) -> list[str]:
    result = baton("history", "--json", *args)
    assert result.status == 0 and "Traceback" not in result.err, result.err
    rows = json_lines(result.out)
    assert all(set(r) == HISTORY_FIELDS for r in rows), rows
    return [r["key"] for r in rows]


def test_history_json_is_one_object_per_line_and_every_filter_narrows_it(journal: Journal) -> None:
    assert keys() == ["a->b@t1", "b->a@t2", "a->b@t3", "review@t3"]
    assert keys("--route", "a->b") == ["a->b@t1", "a->b@t3"]
    assert keys("--route", "a->c") == keys("--route", "review") == ["review@t3"]  # FROM->TO or its name
    assert keys("--tile", "c") == ["review@t3"]  # the target counts
    assert keys("--tile", "b") == ["a->b@t1", "b->a@t2", "a->b@t3"]  # source or target
    assert keys("--outcome", "failed") == ["review@t3"]
    assert keys("--since", "1h") == ["b->a@t2", "a->b@t3", "review@t3"]
    two_hours_ago = datetime.fromtimestamp(time.time() - 2 * 3600).isoformat(timespec="seconds")
    assert keys("--since", two_hours_ago) == ["b->a@t2", "a->b@t3", "review@t3"]
    assert keys("--tile", "a", "--outcome", "delivered", "--since", "1d", "-n", "1") == ["b->a@t2"]
    text = baton("history", "--route", "a->b", "--outcome", "skipped")
    assert text.status == 0 and "the chain reached max_hops=6" in text.out and "review" not in text.out
    assert baton("history", "--route", "nope", "--outcome", "held").out.strip() == (
        "no hand-offs match --route nope --outcome held; the journal holds others (fewer filters show them)")
    baton("history", "--since", "yesterday").one_line_error(2, "--since", "'yesterday'")
    baton("history", "--outcome", "lost").one_line_error(2, "--outcome", "invalid choice")
    baton("history", "--follow", "--all-hosts").one_line_error(2, "--follow")


def test_history_help_examples_all_run(journal: Journal) -> None:
    """Each example in ``baton history --help`` is a command that works (not one that follows: it runs on)."""
    import shlex

    examples = [line.split("  ")[1].strip() for line in baton("history", "--help").out.split("examples:")[1]
                .splitlines() if line.startswith("  baton history")]
    assert len(examples) >= 5
    for example in examples:
        args = shlex.split(example.split("|")[0])[2:]
        if "-f" in args or "--follow" in args:
            continue
        result = baton("history", *args)
        assert result.status == 0 and "Traceback" not in result.err and result.out.strip(), (example, result)


@pytest.mark.parametrize("since", ["yesterday", "1e400s", "2026-02-30", "10 minutes", "0001-01-01T00:00"])
def test_a_bad_since_is_one_line_naming_the_forms_it_takes(since: str) -> None:
    baton("history", "--since", since).one_line_error(2, "--since", "a duration (10m, 2h, 1d)", "an ISO time")


def test_a_journal_that_is_no_database_is_one_line_saying_what_to_do() -> None:
    path = default_journal_path()
    path.parent.mkdir(parents=True)
    path.write_text("these are my notes, not a journal\n" * 200)
    for args in ([], ["--json"], ["--follow"]):
        line = baton("history", *args, timeout=30).one_line_error(1, str(path), "not a journal batonpass can")
        assert "move it aside" in line


def test_rows_not_written_by_batonpass_show_on_one_line_each_without_a_traceback() -> None:
    """A usage column that is no JSON object, an error over several lines with escape sequences (a server's
    answer), a turn id with controls: the table, --json and --follow print them, one line a hand-off."""
    j = Journal(default_journal_path())
    error = "HTTP 500:\n<html>\x1b[31mboom\x1b[0m</html>\r\n"
    add_handoff(j, "a->b", "a", "b", "t1\x1b[2Jx", "failed", error)
    add_handoff(j, "a->b", "a", "b", "t2", "delivered")
    add_handoff(j, "a->b", "a", "b", "t3", "delivered")
    j.db.execute("UPDATE handoffs SET usage='{not json' WHERE turn_id='t2'")
    odd = '{"input_tokens": "many", "cost_usd": "free"}'
    j.db.execute("UPDATE handoffs SET usage=? WHERE turn_id='t3'", (odd,))
    text = baton("history")
    assert text.status == 0 and text.err == "", text
    lines = text.out.splitlines()
    assert len(lines) == 1 + 3 + 1 and "\x1b" not in text.out, text.out  # header, 3 hand-offs, the AI total
    assert lines[1].split()[3] == "t1x" and lines[1].endswith("HTTP 500: <html>boom</html>")
    assert "0 in · 0 out" in lines[3] and lines[4].startswith("AI transforms: 1 call, 0 tokens in")
    rows = json_lines(baton("history", "--json").out)
    assert [r["usage"] for r in rows] == [None, None, {"input_tokens": "many", "cost_usd": "free"}]
    follower = Follower()
    try:
        assert follower.next().split()[0] == "WHEN"
        assert [follower.next().split()[3] for _ in range(3)] == ["t1x", "t2", "t3"]
    finally:
        status, err = follower.interrupt()
    assert status == 0 and err.strip() == "", err


def test_follow_json_prints_the_backlog_then_each_change_and_ctrl_c_exits_0(journal: Journal) -> None:
    follower = Follower("--json", "--route", "a->b", "-n", "1")
    try:
        assert json.loads(follower.next())["key"] == "a->b@t3"  # the latest one first
        add_handoff(journal, "b->a", "b", "a", "t4", "delivered")  # another route: not shown
        add_handoff(journal, "a->b", "a", "b", "t5", "transformed")
        row = json.loads(follower.next())
        assert (row["key"], row["state"], row["prompt"]) == ("a->b@t5", "transformed", "text of t5")
        journal.record_usage("a->b@t5", USAGE)  # an AI transform's call: the table would add it up at the end
        journal.set_state("a->b@t5", "delivered", pane="%3")
        row = json.loads(follower.next())
        assert (row["key"], row["state"], row["pane"], row["usage"]) == ("a->b@t5", "delivered", "%3", USAGE)
    finally:
        status, err = follower.interrupt()
    assert status == 0 and "Traceback" not in err and err.strip() == "", err
    assert follower.rest() == []  # nothing else, no total line: t4 is another route's


#: an AI transform's call, as the journal records it
USAGE = {"model": "claude-haiku-4-5", "input_tokens": 3000, "output_tokens": 300, "cache_write_tokens": 200,
         "cache_read_tokens": 0, "cost_usd": 0.0087}


def columns_of(header: str) -> dict[str, int]:
    """Where each of the table's columns starts, from its header line."""
    names = ("WHEN", "ROUTE", "TURN", "HOP", "OUTCOME", "TRIES", "AI USE", "WHY")
    return {name: header.index(name) for name in names}


def cell(line: str, columns: dict[str, int], name: str) -> str:
    """The text of one column of a row (up to where the next column starts)."""
    names = list(columns)
    start = columns[name]
    end = columns[names[names.index(name) + 1]] if name != names[-1] else len(line)
    return line[start:end].rstrip()


def test_follow_rows_line_up_under_the_header_and_ctrl_c_adds_up_the_ai_calls(journal: Journal) -> None:
    """Rows come one at a time, each fitted to the widths fixed at the start: a later, longer route or turn
    is cut with …, the columns stay where the header put them, no line is wider than the terminal; Ctrl-C
    ends it with the AI transforms' total of ``baton history``, a hand-off shown twice counted once."""
    follower = Follower("-n", "2", env={"COLUMNS": "110"})
    try:
        header = follower.next()
        columns = columns_of(header)
        backlog = [follower.next() for _ in range(2)]
        assert [cell(line, columns, "TURN") for line in backlog] == ["t3", "t3"]
        assert [cell(line, columns, "OUTCOME") for line in backlog] == ["skipped", "failed"]
        assert cell(backlog[1], columns, "WHY").startswith("transform ai-routing")
        long_route, long_turn = "nightly-review-of-everything", "turn-0123456789abcdef0123456789"
        add_handoff(journal, long_route, "a", "c", long_turn, "transformed")
        journal.record_usage(f"{long_route}@{long_turn}", USAGE)
        journal.set_state(f"{long_route}@{long_turn}", "delivering")
        journal.set_state(f"{long_route}@{long_turn}", "failed", error="the pane is gone: " + "why " * 40)
        rows = [follower.next()]  # delivering, failed: perhaps both at one look
        while cell(rows[-1], columns, "OUTCOME") != "failed":
            rows.append(follower.next())
        last = rows[-1]
        assert cell(last, columns, "ROUTE").endswith("…") and long_route.startswith(
            cell(last, columns, "ROUTE")[:-1])
        turn = cell(last, columns, "TURN")
        assert turn.endswith("…") and long_turn.startswith(turn[:-1])
        assert "$0.0087" in cell(last, columns, "AI USE")  # the cost, when the whole of it does not fit
        assert cell(last, columns, "WHY").startswith("the pane is gone: why") and last.endswith("…")
        assert all(len(line) <= 110 for line in [header, *backlog, *rows]), [header, *backlog, *rows]
    finally:
        status, err = follower.interrupt()
    assert status == 0 and "Traceback" not in err and err.strip() == "", err
    assert follower.rest() == ["AI transforms: 1 call, 3200 tokens in, 300 out, $0.0087"]


def test_follow_in_a_narrow_terminal_puts_why_under_its_row_and_no_total_without_ai_calls(
        journal: Journal) -> None:
    follower = Follower("-n", "1", env={"COLUMNS": "80"})
    try:
        header = follower.next()
        columns = columns_of(header)
        row, why = follower.next(), follower.next()
        assert cell(row, columns, "ROUTE") == "review" and cell(row, columns, "OUTCOME") == "failed"
        assert why == "  └ transform ai-routing failed: boom (baton retry review@t3)"
        add_handoff(journal, "a->b", "a", "b", "t4", "delivered")  # no reason: one line
        row = follower.next()
        assert cell(row, columns, "TURN") == "t4" and cell(row, columns, "OUTCOME") == "delivered"
        assert all(len(line) <= 80 for line in (header, row, why))
    finally:
        status, err = follower.interrupt()
    assert status == 0 and err.strip() == "", err
    assert follower.rest() == []  # no AI transform called a model: no total line


def test_follow_waits_for_a_journal_that_does_not_exist_yet() -> None:
    assert not default_journal_path().exists()
    follower = Follower()
    try:
        assert follower.next().split() == [
            "WHEN", "ROUTE", "TURN", "HOP", "OUTCOME", "TRIES", "AI", "USE", "WHY"]
        add_handoff(Journal(default_journal_path()), "x->y", "x", "y", "turn-1", "skipped", "no match")
        line = follower.next()
        assert "x->y" in line and "turn-1" in line and "skipped" in line and "no match" in line
    finally:
        status, err = follower.interrupt()
    assert status == 0 and "Traceback" not in err, err


def wake_ups(pid: int) -> int:
    """How often the main thread of process ``pid`` (the event loop) went to sleep and was woken again so
    far. Only that thread: with ``BATON_WATCHER=watchfiles`` the watcher's own thread wakes every few ms by
    design (README), and the question here is whether the follower looks at the journal on a timer."""
    for line in Path(f"/proc/{pid}/task/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise AssertionError(f"no voluntary_ctxt_switches in /proc/{pid}/task/{pid}/status")


def test_follow_sleeps_while_the_journal_is_quiet_and_wakes_when_it_changes(journal: Journal) -> None:
    follower = Follower("--json", "-n", "1")
    try:
        assert json.loads(follower.next())["key"] == "review@t3"
        add_handoff(journal, "c->d", "c", "d", "t4", "skipped", "no match")  # one change: one line
        assert json.loads(follower.next())["key"] == "c->d@t4"
        before = wake_ups(follower.proc.pid)
        quiet_for(3.0, "a follower that looks at the journal on a timer")
        # the hints of t4's last writes and the second look after each (inotify: 1 or 2; watchfiles, its
        # hints debounced: up to 4); the look in case a hint was lost comes every 5 s; a 0.25 s poll woke
        # 11 or 12 times in these 3 s
        assert wake_ups(follower.proc.pid) - before <= 4
        add_handoff(journal, "c->d", "c", "d", "t5", "failed", "gave up")
        row = json.loads(follower.next())
        assert (row["key"], row["state"], row["last_error"]) == ("c->d@t5", "failed", "gave up")
    finally:
        status, err = follower.interrupt()
    assert status == 0 and err.strip() == "", err


def test_follow_ends_when_its_reader_closes_the_pipe_not_at_the_next_change(journal: Journal) -> None:
    """``baton history -f -n 1 | head -2``: head exits after two lines, and so does the follower, although
    it has nothing more to print (no write fails) until the journal changes."""
    # the journal does not change while it runs
    status, (header, backlog), err = baton_read_by_head("history", "--follow", "-n", "1", lines=2, timeout=15,
                                                        preexec_fn=ctrl_c_as_in_a_terminal)
    assert header.split()[0] == b"WHEN"
    assert b"review" in backlog  # the backlog: all it prints
    assert status == 0
    assert err == b""


@pytest.mark.tmux
def test_every_read_command_answers_json(
    tmux_server: TmuxServer, tmp_path: Path, private_state: Path
) -> None:
    pane = start_agent(tmux_server, tmp_path / "a.jsonl", "a")
    config = write_config(
        tmp_path / "routes.yaml",
        tmux_server.socket,
        {"a": {"pane": pane, "agent": "demo"}, "b": {"pane": "%999", "agent": "demo"}},
        [{"from": "a", "to": "b", "match": "DONE",
          "transform": {"type": "template", "template": "> {response}"}}],
    )
    c = ("-c", str(config))
    tmux_server.type(pane, "all DONE")  # a finished turn: its transcript is there to resolve and preview
    wait_for(lambda: transcript_answers(private_state), what="the demo agent's answer")

    def parsed(*args: str, status: int = 0) -> Any:
        result = baton(*args, "--json", cwd=tmp_path)
        assert result.status == status and "Traceback" not in result.err, (args, result)
        return json.loads(result.out)

    check = parsed("check", *c)
    assert (check["ok"], check["tiles"], check["routes"], check["problems"]) == (True, 2, 1, [])
    status = {r["tile"]: r for r in parsed("status", *c)}
    assert (status["a"]["pane_id"], status["a"]["agent"], status["b"]["state"]) == (pane, "demo", "gone")
    resolved = parsed("resolve", pane, "--agent", "demo", "-L", tmux_server.socket)
    assert resolved["agent"] == "demo" and resolved["steps"] and {"step", "ok", "detail", "value"} == set(
        resolved["steps"][0])
    fires = parsed("preview", "a->b", *c)  # the source's last answer
    assert (fires["fires"], fires["text"], fires["skipped"], fires["to"]) == (True, "> all DONE", None, "b")
    assert any("last one" in note for note in fires["notes"])
    answer = tmp_path / "answer.md"
    answer.write_text("still working\n")
    quiet = parsed("preview", "a->b", "--input", str(answer), *c, status=1)
    assert (quiet["fires"], quiet["text"]) == (False, None) and "does not match" in quiet["skipped"]
    plugins = parsed("plugins")
    names = {(r["kind"], r["name"]) for r in plugins["classes"]}
    assert {("agent", "demo"), ("transform", "template")} <= names
    transcript = FIXTURES / "claude-code" / "home" / ".claude" / "projects" / "-home-dev-my-app" / (
        "842bf2f0-133b-4c4f-9737-29f5b0a34edd.jsonl")
    extracted = parsed("extract", str(transcript))
    assert extracted["text"].strip() and extracted["outcome"] == "completed" and extracted["turn_id"]
    # an error in --json mode: one line on standard error, nothing on standard output, the documented status
    wrong = baton("preview", "nope", "--json", *c)
    wrong.one_line_error(1, "no route 'nope'")
    assert wrong.out == ""


@pytest.mark.tmux
def test_follow_in_a_terminal_fits_its_width_and_ctrl_c_prints_the_total(tmux_server: TmuxServer,
                                                                          journal: Journal) -> None:
    """In a real terminal (no $COLUMNS: the width is the pane's), Ctrl-C typed as a person does."""
    import shlex
    import sys

    from tests.support.paths import REPO

    script = shlex.join([sys.executable, "-m", "pipeline.cli", "history", "--follow", "-n", "2"])
    script = shlex.quote(script + "; echo EXIT=$?; sleep 60")
    pane = tmux_server.new_pane(f"bash --norc --noprofile -c {script}", cwd=REPO, width=100, height=20,
                                env={"NO_COLOR": "1"})

    def screen() -> list[str]:
        return [line for line in tmux_server.run("capture-pane", "-p", "-t", pane).splitlines() if line]

    wait_for(lambda: len(screen()) >= 3, what="the header and the backlog")
    header = screen()[0]
    columns = columns_of(header)
    add_handoff(journal, "summary", "a", "b", "t9", "transformed")
    journal.record_usage("summary@t9", USAGE)
    journal.set_state("summary@t9", "delivered")
    wait_for(lambda: any(cell(line, columns, "TURN") == "t9" and cell(line, columns, "OUTCOME") == "delivered"
                         for line in screen()), what="t9's delivered row")
    rows = [line for line in screen() if line[:2] == "20"]
    assert [cell(line, columns, "ROUTE") for line in rows][:2] == ["a->b", "review"], rows
    assert all(cell(line, columns, "AI USE") in ("", "$0.0087") for line in rows), rows
    assert all(len(line) <= 100 for line in screen())
    tmux_server.run("send-keys", "-t", pane, "C-c")
    wait_for(lambda: "EXIT=0" in screen(), what="Ctrl-C ending the follow")
    lines = screen()
    total = lines[lines.index("EXIT=0") - 1]
    assert total == "AI transforms: 1 call, 3200 tokens in, 300 out, $0.0087", lines
    assert not any("Traceback" in line for line in lines)
