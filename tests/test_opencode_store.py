"""OpenCode's store read safely: the recorded store (text, tool and permission turns), a poll of its rows
during turns, and generated edge cases — a store locked by a writer, rows only in the WAL, unknown schemas,
aborted turns, and `baton extract --agent opencode DB [--session ID]` on the real command line."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pipeline import cli
from plugins.opencode.adapter import OpenCodeAdapter
from plugins.opencode.reader import OpenCodeStore, StoreBusy, StoreMissing, UnknownSchema, store_path
from plugins.opencode.turns import MessageRow, newest_turn_open, turn_ends
from tests.fakes.opencode_store import StoreWriter
from tests.support.paths import FIXTURES

DIR = FIXTURES / "opencode"
DB = DIR / "opencode.db"
RUN_SESSION = "ses_dc8f17e47ffeab8GULcqzFgvSu"  # `opencode run`: one text turn
TUI_SESSION = (
    "ses_dc8f096a4ffeWFuw0M4C3iwELG"  # the TUI: text, tool, slow tool, tool with a permission prompt
)


def dump() -> dict:
    return json.loads((DIR / "db_dump_all_rows.json").read_text())["tables"]


def expected_answers(session: str) -> dict[str, str]:
    """From the recorded rows: each turn's final assistant message id -> its text parts joined."""
    tables = dump()
    messages = [m for m in tables["message"] if m["session_id"] == session]
    final: dict[str, dict] = {}
    for m in sorted(messages, key=lambda m: (m["time_created"], m["id"])):
        if m["data__json"]["role"] == "assistant":
            final[m["data__json"]["parentID"]] = m
    texts = {}
    for m in final.values():
        parts = sorted((p for p in tables["part"] if p["message_id"] == m["id"]), key=lambda p: p["id"])
        texts[m["id"]] = "".join(p["data__json"]["text"] for p in parts if p["data__json"]["type"] == "text")
    return texts


# ---- the recorded store --------------------------------------------------------------------------------


def test_recorded_turns_end_at_their_final_message_with_its_exact_text() -> None:
    store = OpenCodeStore(DB)
    ends = store.finished_turns(TUI_SESSION)
    assert {e.turn_id: e.text for e in ends} == expected_answers(TUI_SESSION)
    assert [e.outcome for e in ends] == ["completed"] * 5
    assert all(e.cwd == "/home/dev/web" for e in ends)
    tool_steps = {m["id"] for m in dump()["message"] if m["data__json"].get("finish") == "tool-calls"}
    assert len(tool_steps) == 3 and not tool_steps & {e.turn_id for e in ends}
    # the permission turn: the `read` step ended with tool-calls, the answer is the step after it
    assert ends[-1].text.startswith("PROBE_TOOL_FINAL_BEGIN") and "/etc/hostname" in ends[-1].text
    assert (
        store.last_turn(RUN_SESSION).text == expected_answers(RUN_SESSION)["msg_2370e8914001Ka9v3R6tOJknuv"]
    )
    assert store.state(TUI_SESSION) == (False, "msg_23710522b001YbX3nZ679c6yj1")


def test_a_tool_step_is_not_a_turn_end_when_asked_by_id() -> None:
    store = OpenCodeStore(DB)
    assert store.turn_end("msg_2370fab81001g0jyYy43sFJGmJ") is None  # finish tool-calls
    assert store.turn_end("msg_2370fadc90015tnXbgzy1K7imz").turn_id == "msg_2370fadc90015tnXbgzy1K7imz"
    assert store.turn_end("msg_missing") is None


def test_sessions_carry_directory_times_and_recent_prompts() -> None:
    sessions = OpenCodeStore(DB).sessions("/home/dev/web")
    assert [s.id for s in sessions] == [TUI_SESSION, RUN_SESSION]  # most recently updated first
    assert sessions[0].recent_prompts[0] == "TOOLASK: read a file outside the project (tui5)"
    assert sessions[0].newest_user == "msg_23710522b001YbX3nZ679c6yj1"
    assert OpenCodeStore(DB).sessions("/elsewhere") == []
    # a folder reached through a symlink: the session may hold either spelling
    assert len(OpenCodeStore(DB).sessions(("/srv/link-to-web", "/home/dev/web"))) == 2
    assert OpenCodeStore(DB).sessions(()) == []


def test_the_recorded_poll_shows_each_turn_ending_exactly_once() -> None:
    """Replay every row change seen while the real OpenCode worked: a turn is reported only once its final
    message has finish=stop AND time.completed (the poll shows finish=stop ~190 ms before completed)."""
    rows: dict[str, MessageRow] = {}
    last_user: dict[str, str] = {}
    reported: list[str] = []
    busy_seen = []
    for line in (DIR / "db_poll_text_turn.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("table") != "message":
            continue
        role, session = rec["type"], rec["owner"]
        if role == "user":
            last_user[session] = rec["id"]
        parent = rows[rec["id"]].parent_id if rec["id"] in rows else last_user.get(session)
        rows[rec["id"]] = MessageRow(
            id=rec["id"],
            session_id=session,
            created_ms=rec["time"]["created"],
            role=role,
            parent_id=None if role == "user" else parent,
            finish=rec.get("finish"),
            completed_ms=rec["time"].get("completed"),
            error=None,
            cwd=None,
        )
        for end in turn_ends(list(rows.values())):
            if end.id not in reported:
                reported.append(end.id)
        busy_seen.append(newest_turn_open([m for m in rows.values() if m.session_id == session]))
    assert reported == ["msg_2370e8914001Ka9v3R6tOJknuv", *expected_answers(TUI_SESSION)]
    assert True in busy_seen and busy_seen[-1] is False


# ---- generated edge cases ------------------------------------------------------------------------------


def test_rows_only_in_the_wal_are_read_in_place_and_a_bare_copy_misses_them(tmp_path: Path) -> None:
    writer = StoreWriter(tmp_path / "opencode.db")
    session = writer.session(tmp_path)
    turn = writer.turn(session, "hello", "the answer")
    assert (tmp_path / "opencode.db-wal").stat().st_size > 0
    assert OpenCodeStore(tmp_path / "opencode.db").last_turn(session).turn_id == turn
    shutil.copy(tmp_path / "opencode.db", tmp_path / "copy.db")
    with pytest.raises(StoreMissing, match="no tables yet"):  # the schema itself is still only in the WAL
        OpenCodeStore(tmp_path / "copy.db").sessions()
    writer.close()


def test_a_store_whose_tables_are_not_made_yet_is_missing_not_unknown(tmp_path: Path) -> None:
    """A fresh OpenCode creates its store seconds before its tables (docs/agents.md, OpenCode): read in
    between, the file is a store not there yet — waited for — not one of an unknown layout, which would have
    the tile read from the screen for as long as that OpenCode runs. Once the tables are made, it reads."""
    db = tmp_path / "opencode.db"
    sqlite3.connect(db).close()
    store = OpenCodeStore(db)
    with pytest.raises(StoreMissing, match="no tables yet"):
        store.sessions()
    writer = StoreWriter(db)
    session = writer.session(tmp_path)
    assert [s.id for s in store.sessions()] == [session]
    writer.close()


def test_an_aborted_turn_is_failed_with_its_partial_text(tmp_path: Path) -> None:
    writer = StoreWriter(tmp_path / "opencode.db")
    session = writer.session(tmp_path)
    user = writer.user(session, "SLOWTEST")
    step = writer.step(session, user)
    store = OpenCodeStore(tmp_path / "opencode.db")
    assert store.finished_turns(session) == [] and store.state(session) == (True, user)
    writer.finish(session, step, texts=("half an ans",), finish=None,
                  error={"name": "MessageAbortedError", "data": {"message": "Aborted"}})
    [end] = store.finished_turns(session)
    assert (end.turn_id, end.outcome, end.text) == (step, "failed", "half an ans")
    assert end.detail == "MessageAbortedError: Aborted"
    assert store.state(session) == (False, user)


def test_a_stop_with_a_tool_still_running_or_an_unknown_finish_is_not_an_end(tmp_path: Path) -> None:
    writer = StoreWriter(tmp_path / "opencode.db")
    session = writer.session(tmp_path)
    user = writer.user(session, "go")
    step = writer.step(session, user, tool="running")
    writer.finish(session, step, finish="stop", tool_done=False)
    store = OpenCodeStore(tmp_path / "opencode.db")
    assert store.finished_turns(session) == []
    unknown = writer.step(session, user)
    writer.finish(session, unknown, finish="unknown")
    assert store.finished_turns(session) == [] and store.state(session)[0] is True
    final = writer.step(session, user)
    writer.finish(session, final, texts=("a", "b"), finish="length")
    [end] = store.finished_turns(session)
    assert (end.turn_id, end.text, end.detail) == (final, "ab", "finish length")


def test_a_locked_store_is_waited_out_then_reported_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "opencode.db"
    writer = StoreWriter(path, journal_mode="delete")  # rollback journal: a writer's lock blocks readers
    session = writer.session(tmp_path)
    writer.turn(session, "q", "a")
    store = OpenCodeStore(path, busy_timeout_s=0.05, retries=6)
    assert store.last_turn(session).text == "a"  # connected and schema checked before the lock
    locker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    locker.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(0.3, lambda: locker.execute("COMMIT"))
    release.start()
    assert store.last_turn(session).text == "a"  # retried until the writer let go
    release.join()
    locker.execute("BEGIN EXCLUSIVE")
    with pytest.raises(StoreBusy, match="stayed locked"):
        OpenCodeStore(path, busy_timeout_s=0.01, retries=2).last_turn(session)
    locker.execute("COMMIT")
    locker.close()
    writer.close()


def test_unknown_schemas_and_missing_stores_are_errors_not_crashes(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.executescript("CREATE TABLE session (id TEXT, directory TEXT); CREATE TABLE message (id TEXT);")
    conn.close()
    with pytest.raises(UnknownSchema, match=r"no .*message\.data"):
        OpenCodeStore(other).sessions()
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(UnknownSchema, match="not a readable SQLite database"):
        OpenCodeStore(junk).sessions()
    with pytest.raises(StoreMissing):
        OpenCodeStore(tmp_path / "absent.db").sessions()


def test_the_store_path_follows_the_process_environment(tmp_path: Path) -> None:
    home = {"HOME": "/h"}
    assert store_path(home) == Path("/h/.local/share/opencode/opencode.db")
    assert store_path({**home, "XDG_DATA_HOME": "/x"}) == Path("/x/opencode/opencode.db")
    assert store_path({**home, "OPENCODE_DB": "/abs/o.db"}) == Path("/abs/o.db")
    assert store_path({**home, "OPENCODE_DB": "rel.db"}) == Path("/h/.local/share/opencode/rel.db")
    assert store_path({**home, "OPENCODE_DB": ":memory:"}) is None
    (tmp_path / "opencode").mkdir()
    (tmp_path / "opencode" / "opencode-beta.db").write_bytes(b"")
    assert store_path({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "opencode" / "opencode-beta.db"


# ---- baton extract -----------------------------------------------------------------------------------


def test_extract_file_picks_the_newest_session_or_the_one_named() -> None:
    newest = OpenCodeAdapter.extract_file(DB)
    assert newest.completion.turn_id == "msg_237106d77001moKkFewy6QJrTF" and newest.source == "store"
    named = OpenCodeAdapter.extract_file(DB, session=RUN_SESSION)
    assert named.text == expected_answers(RUN_SESSION)["msg_2370e8914001Ka9v3R6tOJknuv"]
    with pytest.raises(LookupError, match="no session ses_nope"):
        OpenCodeAdapter.extract_file(DB, session="ses_nope")


def test_baton_extract_prints_the_exact_answer() -> None:
    """The real command line, once: the answer exactly, with its trailing newline only."""
    run = subprocess.run([sys.executable, "-m", "pipeline.cli", "extract", "--agent", "opencode", str(DB),
                          "--session", RUN_SESSION], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == expected_answers(RUN_SESSION)["msg_2370e8914001Ka9v3R6tOJknuv"] + "\n"


def test_baton_extract_json_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["extract", "--agent", "opencode", str(DB), "--json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert as_json["turn_id"] == "msg_237106d77001moKkFewy6QJrTF" and as_json["cwd"] == "/home/dev/web"
    assert cli.main(["extract", "--agent", "opencode", str(DB), "--session", "ses_nope"]) == 1
    assert "no session ses_nope" in capsys.readouterr().err
    StoreWriter(tmp_path / "opencode.db").session(tmp_path)
    assert cli.main(["extract", "--agent", "opencode", str(tmp_path / "opencode.db")]) == 1
    assert "holds no finished turn" in capsys.readouterr().err
    assert cli.main(["extract", "--agent", "claude", str(DB), "--session", RUN_SESSION]) == 1
    assert "--session is not an option for claude" in capsys.readouterr().err


def test_a_look_at_a_session_is_one_snapshot_while_turns_end_meanwhile(tmp_path: Path) -> None:
    """What the follower asks at each hint — the turns that ended, and whether one is still open — comes
    from one read: a turn ending between two reads looked neither finished nor open, and the follower
    then waited for the store's next write (the fault matrix lost the last turn that way). A writer ends
    turns back to back while the session is looked at; an idle session's newest turn is always among the
    ends. (Two separate reads were inconsistent in about a third of such looks here.)"""
    path = tmp_path / "opencode.db"
    started, stop, box = threading.Event(), threading.Event(), {}

    def write_turns() -> None:
        writer = StoreWriter(path)  # its own connection, in its own thread, as OpenCode is its own process
        box["session"] = session = writer.session(tmp_path)
        started.set()
        i = 0
        while not stop.is_set():
            user = writer.user(session, f"task {i}")
            writer.finish(session, writer.step(session, user), texts=(f"answer {i}",))
            i += 1
        writer.close()

    thread = threading.Thread(target=write_turns)
    thread.start()
    try:
        assert started.wait(10)
        store = OpenCodeStore(path)
        idle_looks = 0
        for _ in range(2000):
            look = store.look(box["session"])
            if look.newest_user is None or look.open_turn:
                continue
            idle_looks += 1
            assert look.newest_user in {end.user_id for end in look.ends}, look
            if idle_looks >= 300:
                break
        assert idle_looks > 0
    finally:
        stop.set()
        thread.join()
