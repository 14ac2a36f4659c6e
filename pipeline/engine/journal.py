"""The hand-off journal: a durable record of every completion and hand-off (SQLite, standard library).

It is what makes batonpass exactly-once across crashes. State is written *before* each side effect:

    pending ──> transformed ──> delivering ──> delivered | unconfirmed | failed
        │            └──> held (its route's max_per_hour) ──┘
        ├──> awaiting (a route's ``gate: person``) ──> transformed (passed) | dropped | expired
        └──────────────> skipped (no match, max_hops, too old, transform said so)

A hand-off to a tile on another host ends ``published`` here once the bus acknowledged it; the target
host's journal records it from ``transformed`` on (:meth:`Journal.record_incoming`), keyed the same.

A completion counts as seen only once its hand-offs are recorded (``routed``): a crash between the two
makes the adapter's start-up report of the same turn go through again. A hand-off found ``delivering``
after a crash has an unknown outcome: it is confirmed against the target before anything is retyped.

One connection per process, WAL mode, ``synchronous=NORMAL`` (a power cut may lose the last commit, a
process crash cannot). Blocking calls are tiny; the engine runs them directly on the event loop thread.

A journal that cannot be written (a full disk, a read-only file or folder, a lock another process holds,
a damaged file) is a *fault*, not a crash. At start :func:`open_journal` turns it into one line naming the
file and the fix (:class:`JournalUnusable`). While running, the stages make each journal call through
:meth:`Journal.until_done` (reads: :meth:`Journal.until_read`), and the dispatcher writes ``delivering``
with :meth:`Journal.try_write` before it types: while the journal cannot be written they wait — one log
line says why, one says when a write went through again — so nothing is typed that was not journaled
first, and every hand-off is still there after.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

import anyio

from pipeline.plugin.events import Completion, Prompt, handoff_key
from pipeline.spool import state_dir
from pipeline.system.logs import redact

__all__ = ["FINAL_STATES", "MEMORY", "STATES", "ActionRecord", "HandoffRecord", "HandoffState",
           "HistoryFilter", "Journal", "JournalUnusable", "check_folder", "default_journal_path", "describe",
           "is_fault", "open_journal"]

log = logging.getLogger("batonpass")
T = TypeVar("T")

HandoffState = Literal[
    "pending", "transformed", "awaiting", "held", "delivering", "delivered", "unconfirmed", "failed",
    "skipped", "published", "dropped", "expired",
]
#: every state, in the order a hand-off passes them (``baton history --outcome`` takes these)
STATES: tuple[HandoffState, ...] = get_args(HandoffState)
FINAL_STATES = ("delivered", "unconfirmed", "failed", "skipped", "published", "dropped", "expired")
#: how long finished records are kept (``baton history`` looks back this far)
KEEP_S = 30 * 24 * 3600.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    tile TEXT NOT NULL, turn_id TEXT NOT NULL, outcome TEXT NOT NULL, signal TEXT NOT NULL,
    hop INTEGER NOT NULL, at REAL NOT NULL, seen REAL NOT NULL, routed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tile, turn_id));
CREATE TABLE IF NOT EXISTS handoffs (
    key TEXT PRIMARY KEY, route TEXT NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL,
    turn_id TEXT NOT NULL, hop INTEGER NOT NULL, state TEXT NOT NULL, response TEXT, prompt TEXT,
    prompt_digest TEXT, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '',
    note TEXT NOT NULL DEFAULT '', pane TEXT, created REAL NOT NULL, updated REAL NOT NULL);
CREATE INDEX IF NOT EXISTS handoffs_state ON handoffs (state);
CREATE INDEX IF NOT EXISTS handoffs_updated ON handoffs (updated);
CREATE TABLE IF NOT EXISTS hops (
    id INTEGER PRIMARY KEY AUTOINCREMENT, tile TEXT NOT NULL, hop INTEGER NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS tiles (tile TEXT PRIMARY KEY, followed_until REAL NOT NULL);
CREATE TABLE IF NOT EXISTS actions (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL, target TEXT NOT NULL, origin TEXT NOT NULL, host TEXT NOT NULL,
    outcome TEXT NOT NULL, message TEXT NOT NULL DEFAULT '', created REAL NOT NULL, updated REAL NOT NULL);
CREATE INDEX IF NOT EXISTS actions_created ON actions (created);
CREATE TABLE IF NOT EXISTS holds (route TEXT PRIMARY KEY, origin TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS gates (
    key TEXT PRIMARY KEY, notified REAL, decision TEXT, decided_by TEXT, decided_at REAL, original TEXT);
"""
#: ``Journal(MEMORY)``: a journal that lives as long as the process (``--dry-run``, the unit tests)
MEMORY = ":memory:"
#: how long one call waits for a lock another process holds. Short: the daemon is the only writer (others
#: read, and WAL readers never block it), and the call blocks the event loop meanwhile
BUSY_TIMEOUT_S = 1.0
#: a journal that cannot be written is tried again this soon, then less often
RETRY_FIRST_S, RETRY_MAX_S = 0.2, 5.0
#: SQLite's primary result codes that say the file cannot be used now (not a bug in a statement): busy,
#: locked, no memory, read-only, I/O error, damaged, full, cannot open, protocol, not a database
_FAULT_CODES = {5, 6, 7, 8, 10, 11, 13, 14, 15, 26}
_LOCKED, _READ_ONLY, _DAMAGED, _FULL = {5, 6}, {8, 14}, {11, 26}, {13}
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EEXIST, errno.EISDIR)


class JournalUnusable(Exception):
    """The journal (or its folder) cannot be written: the message names the file and the fix."""


def is_fault(exc: BaseException) -> bool:
    """``exc``, from SQLite, says the journal cannot be used now (a full disk, read-only, locked, damaged)
    rather than a mistake in batonpass (a syntax error is no fault)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.DatabaseError) and isinstance(code, int) and code & 0xFF in _FAULT_CODES


def describe(exc: BaseException, path: Path) -> str:
    """What is wrong with the journal at ``path`` and what to do, in one line."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    where = getattr(exc, "filename", None) or path
    if code in _DAMAGED:
        return (f"the journal {path} is damaged ({why}): move it aside (mv {path} {path}.damaged) and "
                "baton run starts a new one")
    if code in _LOCKED:
        return (f"the journal {path} is locked by another process ({why}): end the program that holds it "
                f"(fuser -v {path}), then start again")
    if code in _FULL or getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"no room to write {where} ({why}): free space on its disk"
    if code in _READ_ONLY or getattr(exc, "errno", None) in _NOT_WRITABLE:
        return (f"cannot write {where} ({why}): make it and its folder writable (chmod u+w; chattr -i; a "
                "read-only mount), or point XDG_STATE_HOME at a folder you can write")
    return f"cannot use the journal {path} ({why}): check its disk, or point XDG_STATE_HOME elsewhere"


def check_folder(folder: Path) -> None:
    """Make ``folder`` (0700) and write and remove a small file in it: raises :class:`JournalUnusable` when
    it cannot be made or written (read-only, full, not a folder)."""
    probe = folder / f".probe-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(probe, "wb") as f:
            f.write(b"batonpass checks it can write here\n")
    except OSError as exc:
        raise JournalUnusable(describe(exc, folder)) from None
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


def open_journal(path: str | os.PathLike[str] | None = None) -> Journal:
    """The daemon's journal, with one real write tried first: a journal ``baton run`` cannot write raises
    :class:`JournalUnusable` at start, not a traceback on its first hand-off."""
    where = Path(path) if path is not None else default_journal_path()
    check_folder(where.parent)
    journal = None
    try:
        journal = Journal(where)
        journal.probe()
        return journal
    except (sqlite3.Error, OSError) as exc:
        if journal is not None:
            journal.close()
        if isinstance(exc, sqlite3.Error) and not is_fault(exc):
            raise
        raise JournalUnusable(describe(exc, where)) from None


def default_journal_path() -> Path:
    return state_dir() / "journal.sqlite3"


@dataclass(frozen=True)
class HandoffRecord:
    key: str
    route: str
    source: str
    target: str
    turn_id: str
    hop: int
    state: HandoffState
    response: str | None
    prompt: str | None
    attempts: int
    last_error: str
    note: str
    pane: str | None
    created: float
    updated: float
    #: the AI transform's model call: model, tokens, cost_usd (None: no model was called)
    usage: dict[str, Any] | None = None

    def to_prompt(self) -> Prompt:
        branch = self.target if self.key == handoff_key(self.route, self.turn_id, self.target) else ""
        return Prompt(route=self.route, source=self.source, target=self.target, text=self.prompt or "",
                      turn_id=self.turn_id, hop=self.hop, created=self.created, branch=branch)


@dataclass(frozen=True)
class ActionRecord:
    """A person's action (``baton approve``, ``deny``, ``send``, ``retry``, ``hold``, ``resume``; the web
    page's buttons): what, on what, from where, and how it ended."""

    id: str
    #: approve, deny, send, retry, hold, resume
    kind: str
    #: the tile, route or hand-off key it was about
    target: str
    #: where it came from: ``cli``, ``web 127.0.0.1``, ``bus <host>``
    origin: str
    #: the host it was performed on
    host: str
    #: ``started`` (it stopped before it knew), ``done``, ``refused``
    outcome: str
    message: str
    created: float
    updated: float


@dataclass(frozen=True)
class HistoryFilter:
    """Which hand-offs ``baton history`` shows: every field set must hold (None: any)."""

    route: str | None = None
    #: the source or the target
    tile: str | None = None
    outcome: str | None = None
    #: created at or after (epoch seconds)
    since: float | None = None

    def sql(
        self, extra: tuple[str, ...] = (), extra_args: tuple[object, ...] = ()
    ) -> tuple[str, tuple[object, ...]]:
        """`` WHERE ...`` (or "") and its arguments."""
        terms, args = list(extra), list(extra_args)
        if self.route is not None:  # a route's name, or FROM->TO (the route's tiles, named or not)
            terms.append("(route = ? OR source || '->' || target = ?)")
            args += [self.route, self.route]
        if self.tile is not None:
            terms.append("(source = ? OR target = ?)")
            args += [self.tile, self.tile]
        if self.outcome is not None:
            terms.append("state = ?")
            args.append(self.outcome)
        if self.since is not None:
            terms.append("created >= ?")
            args.append(self.since)
        return (" WHERE " + " AND ".join(terms) if terms else ""), tuple(args)

    def matches(self, row: dict[str, object]) -> bool:
        """The same test on a row read from elsewhere (``--all-hosts``: the bus)."""
        created, between = row.get("created"), f"{row.get('source')}->{row.get('target')}"
        return ((self.route is None or self.route in (row.get("route"), between))
                and (self.tile is None or self.tile in (row.get("source"), row.get("target")))
                and (self.outcome is None or row.get("state") == self.outcome)
                and (self.since is None or (isinstance(created, int | float) and created >= self.since)))


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class Journal:
    """The journal at ``path`` (default: the user's state folder), or one in memory for ``MEMORY``:
    the same code either way, so the stages never ask whether there is a journal."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.memory = path == MEMORY
        self.path = Path(path) if path is not None else default_journal_path()
        if self.memory:
            self.db = sqlite3.connect(MEMORY, isolation_level=None, check_same_thread=False)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fresh = not self.path.exists()
            self.db = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_S,
                                      check_same_thread=False)
            if fresh:
                os.chmod(self.path, 0o600)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        self._add_columns()
        #: why the journal cannot be written now, "" while it can (said once per pause)
        self.fault = ""

    @classmethod
    def copy_of(cls, path: str | os.PathLike[str] | None = None) -> Journal:
        """A journal in memory that starts as a copy of the one at ``path`` (default: the user's), read
        without writing to it: ``baton run --dry-run`` decides as the daemon would — which turns were
        handed off, where each tile was followed until — and leaves the daemon's journal alone. Empty when
        there is no journal yet (or it cannot be read: said in the log)."""
        journal = cls(MEMORY)
        where = Path(path) if path is not None else default_journal_path()
        if not where.exists():
            return journal
        try:
            source = sqlite3.connect(f"{where.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
            try:
                source.backup(journal.db)
            finally:
                source.close()
            journal.db.executescript(SCHEMA)
            journal._add_columns()
        except sqlite3.Error as exc:
            log.warning("cannot read the journal %s (%s); this run starts from an empty one", where, exc)
            journal.close()
            journal = cls(MEMORY)
        return journal

    def _add_columns(self) -> None:
        """Columns newer than the journal file (it outlives upgrades): added in place, old rows null."""
        have = {row[1] for row in self.db.execute("PRAGMA table_info(handoffs)")}
        for column, kind in _ADDED_COLUMNS.items():
            if column not in have:
                try:
                    self.db.execute(f"ALTER TABLE handoffs ADD COLUMN {column} {kind}")
                except sqlite3.OperationalError as exc:  # another process added it in between
                    if "duplicate column" not in str(exc):
                        raise

    def close(self) -> None:
        self.db.close()

    # ---- faults: a journal that cannot be written pauses what depends on it ------------------------------

    def probe(self) -> None:
        """One real write that changes nothing (the header's ``user_version``, set to what it is): raises
        what any write would raise now."""
        (version,) = self.db.execute("PRAGMA user_version").fetchone()
        self.db.execute(f"PRAGMA user_version = {int(version)}")

    def try_write(self, write: Callable[[], object]) -> bool:
        """``write()``; False, said once per pause, when the journal cannot be written now. In a pause
        the probe goes first: a write that happens to change nothing proves nothing."""
        try:
            if self.fault:
                self.probe()
            write()
        except sqlite3.Error as exc:
            if not is_fault(exc):
                raise
            self._paused(exc)
            return False
        self._resumed()
        return True

    async def until_writable(self) -> None:
        """Wait until a write goes through (tried again and again, less and less often)."""
        delay = RETRY_FIRST_S
        while not self.try_write(self.probe):
            await anyio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    async def until_done(self, call: Callable[[], T]) -> T:
        """``call()``, a write, waiting out a journal that cannot be used now: the caller, and what it
        would do next, waits with it; nothing is dropped."""
        return await self._until(call, resumes=True)

    async def until_read(self, call: Callable[[], T]) -> T:
        """``call()``, a read, waited out like a write; a read that goes through says nothing of writes."""
        return await self._until(call, resumes=False)

    async def _until(self, call: Callable[[], T], *, resumes: bool) -> T:
        delay = RETRY_FIRST_S
        while True:
            try:
                if resumes and self.fault:
                    self.probe()
                result = call()
            except sqlite3.Error as exc:
                if not is_fault(exc):
                    raise
                self._paused(exc)
                await anyio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            if resumes:
                self._resumed()
            return result

    async def recover(self, exc: BaseException) -> None:
        """After ``exc``, a fault raised by a journal call made elsewhere: say so (once), wait a moment,
        then until the journal can be written again."""
        self._paused(exc)
        await anyio.sleep(RETRY_FIRST_S)
        await self.until_writable()

    def _paused(self, exc: BaseException) -> None:
        if not self.fault:
            self.fault = describe(exc, self.path)
            log.error("journal: %s; delivery paused: nothing is typed until the journal can be written",
                      self.fault)

    def _resumed(self) -> None:
        if self.fault:
            self.fault = ""
            log.warning("journal: %s can be written again; delivery resumes", self.path)

    # ---- completions ----------------------------------------------------------------------------------

    def seen_completion(self, tile: str, turn_id: str) -> tuple[int, bool] | None:
        """(hop, routed) of a turn seen before, or None: a routed turn is done with; one seen but not
        routed (a crash came between) is handled again, keeping its hop."""
        row = self.db.execute("SELECT hop, routed FROM completions WHERE tile=? AND turn_id=?",
                              (tile, turn_id)).fetchone()
        return None if row is None else (int(row[0]), bool(row[1]))

    def record_completion(self, c: Completion) -> None:
        self.db.execute(
            "INSERT INTO completions (tile, turn_id, outcome, signal, hop, at, seen) VALUES (?,?,?,?,?,?,?) "
            "ON CONFLICT (tile, turn_id) DO UPDATE SET hop=excluded.hop",
            (c.tile, c.turn_id, c.outcome, c.signal, c.hop, c.at, time.time()))

    def record_routing(
        self, c: Completion, decisions: Sequence[tuple[Prompt | None, str, str, str, str, *tuple[str, ...]]]
    ) -> None:
        """All hand-offs of one completion, and the completion marked routed, in one transaction.
        Each decision is (prompt or None, route, target, state, reason[, branch]): a fan-out's branch (its
        target) is part of the key (:func:`~pipeline.plugin.events.handoff_key`)."""
        now = time.time()
        with self._tx():
            for prompt, route, target, state, reason, *branch in decisions:
                text = prompt.text if prompt is not None else None
                self.db.execute(
                    "INSERT INTO handoffs (key, route, source, target, turn_id, hop, state, prompt,"
                    " prompt_digest, note, last_error, created, updated) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
                    " ON CONFLICT (key) DO UPDATE SET state=excluded.state, target=excluded.target,"
                    " prompt=excluded.prompt,"
                    " prompt_digest=excluded.prompt_digest, note=excluded.note, "
                    "last_error=excluded.last_error,"
                    " hop=excluded.hop, updated=excluded.updated WHERE handoffs.state = 'pending'",
                    (
                        handoff_key(route, c.turn_id, *branch),
                        route,
                        c.tile,
                        target,
                        c.turn_id,
                        prompt.hop if prompt is not None else c.hop + 1,
                        state,
                        text,
                        digest(text) if text else None,
                        redact(reason) if state != "failed" else "",
                        redact(reason) if state == "failed" else "",
                        now,
                        now,
                    ),
                )
            self.db.execute("UPDATE completions SET routed=1 WHERE tile=? AND turn_id=?", (c.tile, c.turn_id))

    def record_pending(self, c: Completion, routes: Sequence[tuple[str, str, *tuple[str, ...]]]) -> None:
        """Before the transforms run (an AI transform may take a while): each (route, target[, branch]) as
        pending."""
        now = time.time()
        with self._tx():
            for route, target, *branch in routes:
                self.db.execute(
                    "INSERT OR IGNORE INTO handoffs (key, route, source, target, turn_id, hop, state, "
                    "created, updated)"
                    " VALUES (?,?,?,?,?,?,'pending',?,?)",
                    (handoff_key(route, c.turn_id, *branch), route, c.tile, target, c.turn_id, c.hop + 1, now,
                     now),
                )

    def record_incoming(self, prompt: Prompt, note: str = "", state: HandoffState = "transformed") -> bool:
        """A prompt that came over the bus from another host, as ``transformed`` (``awaiting`` when its
        route has a person's gate); False when its key is already here (a redelivery: it must not be typed
        twice)."""
        now = time.time()
        cur = self.db.execute(
            "INSERT OR IGNORE INTO handoffs (key, route, source, target, turn_id, hop, state, prompt, "
            "prompt_digest,"
            " note, created, updated) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                prompt.key,
                prompt.route,
                prompt.source,
                prompt.target,
                prompt.turn_id,
                prompt.hop,
                state,
                prompt.text,
                digest(prompt.text),
                redact(note),
                prompt.created,
                now,
            ),
        )
        return cur.rowcount == 1

    # ---- hand-offs --------------------------------------------------------------------------------------

    def handoff(self, key: str) -> HandoffRecord | None:
        row = self.db.execute(f"SELECT {_COLUMNS} FROM handoffs WHERE key=?", (key,)).fetchone()
        return _record(row) if row else None

    def record_usage(self, key: str, usage: dict[str, Any]) -> None:
        """What the hand-off's AI transform used (model, tokens, cost)."""
        self.db.execute("UPDATE handoffs SET usage=? WHERE key=?", (json.dumps(usage), key))

    def set_state(self, key: str, state: HandoffState, *, error: str | None = None, note: str | None = None,
                  pane: str | None = None, attempt: bool = False) -> None:
        sets: list[str] = ["state=?", "updated=?"]
        args: list[object] = [state, time.time()]
        if error is not None:
            sets.append("last_error=?")
            args.append(redact(error))
        if note is not None:
            sets.append("note=?")
            args.append(redact(note))
        if pane is not None:
            sets.append("pane=?")
            args.append(pane)
        if attempt:
            sets.append("attempts=attempts+1")
        self.db.execute(f"UPDATE handoffs SET {', '.join(sets)} WHERE key=?", (*args, key))

    def unfinished(self) -> list[HandoffRecord]:
        """Hand-offs a previous run left before a final state, oldest first."""
        rows = self.db.execute(f"SELECT {_COLUMNS} FROM handoffs WHERE state NOT IN {FINAL_STATES} "
                               "ORDER BY created").fetchall()
        return [_record(r) for r in rows]

    def history(self, limit: int = 100, match: HistoryFilter | None = None) -> list[HandoffRecord]:
        """The latest ``limit`` hand-offs that ``match`` (default: all), oldest first."""
        where, args = (match or HistoryFilter()).sql()
        rows = self.db.execute(f"SELECT {_COLUMNS} FROM handoffs{where} ORDER BY created DESC, key LIMIT ?",
                               (*args, limit)).fetchall()
        return [_record(r) for r in reversed(rows)]

    def changed_since(self, at: float, match: HistoryFilter | None = None) -> list[HandoffRecord]:
        """Hand-offs that ``match`` whose record changed at or after ``at``, in the order they changed
        (``baton history --follow``)."""
        where, args = (match or HistoryFilter()).sql(("updated >= ?",), (at,))
        rows = self.db.execute(f"SELECT {_COLUMNS} FROM handoffs{where} ORDER BY updated, key",
                               args).fetchall()
        return [_record(r) for r in rows]

    def typed_since(self, route: str, target: str, at: float, but: str = "") -> list[float]:
        """When each hand-off of ``route`` to ``target`` (other than ``but``) typed at or after ``at`` was
        last recorded, oldest first (the route's ``max_per_hour`` counts these, per target: a fan-out's
        targets each have the route's limit)."""
        rows = self.db.execute(
            "SELECT updated FROM handoffs WHERE route=? AND target=? AND updated>=? AND key!=? AND state IN "
            "('delivering', 'delivered', 'unconfirmed') ORDER BY updated",
            (route, target, at, but),
        ).fetchall()
        return [float(r[0]) for r in rows]

    def prune(self, older_than_s: float = KEEP_S) -> int:
        """Forget finished hand-offs and completions older than ``older_than_s`` (the journal of a tool
        left running for months must not grow without end). Returns how many hand-offs went."""
        cutoff = time.time() - older_than_s
        with self._tx():
            gone = self.db.execute(f"DELETE FROM handoffs WHERE updated < ? AND state IN {FINAL_STATES}",
                                   (cutoff,)).rowcount
            self.db.execute("DELETE FROM completions WHERE seen < ? AND routed = 1", (cutoff,))
            self.db.execute("DELETE FROM hops WHERE at < ?", (cutoff,))
            self.db.execute("DELETE FROM actions WHERE updated < ?", (cutoff,))
        return gone

    # ---- actions: what people did (approve, deny, send, retry, hold, resume) -----------------------------

    def start_action(self, action_id: str, kind: str, target: str, origin: str, host: str) -> bool:
        """Record an action as ``started``, before its side effect; False when ``action_id`` is recorded
        already (the same action again, from the bus: it must not be done twice)."""
        now = time.time()
        cur = self.db.execute(
            "INSERT OR IGNORE INTO actions (id, kind, target, origin, host, outcome, created, updated) "
            "VALUES (?,?,?,?,?,'started',?,?)", (action_id, kind, target, origin, host, now, now))
        return cur.rowcount == 1

    def end_action(self, action_id: str, ok: bool, message: str) -> None:
        self.db.execute("UPDATE actions SET outcome=?, message=?, updated=? WHERE id=?",
                        ("done" if ok else "refused", redact(message), time.time(), action_id))

    def action(self, action_id: str) -> ActionRecord | None:
        row = self.db.execute(f"SELECT {_ACTION_COLUMNS} FROM actions WHERE id=?", (action_id,)).fetchone()
        return ActionRecord(*row) if row else None

    def actions(self, limit: int = 100, since: float | None = None) -> list[ActionRecord]:
        """The latest ``limit`` actions (created at or after ``since``), oldest first."""
        rows = self.db.execute(f"SELECT {_ACTION_COLUMNS} FROM actions WHERE created >= ? "
                               "ORDER BY created DESC, id LIMIT ?", (since or 0.0, limit)).fetchall()
        return [ActionRecord(*r) for r in reversed(rows)]

    def actions_changed_since(self, at: float) -> list[ActionRecord]:
        """Actions whose record changed at or after ``at``, in the order they changed (``--follow``)."""
        rows = self.db.execute(f"SELECT {_ACTION_COLUMNS} FROM actions WHERE updated >= ? "
                               "ORDER BY updated, id", (at,)).fetchall()
        return [ActionRecord(*r) for r in rows]

    # ---- held routes (baton hold / resume): their hand-offs stay queued -----------------------------------

    def hold(self, route: str, origin: str) -> bool:
        """Hold ``route``; False when it was held already."""
        cur = self.db.execute("INSERT OR IGNORE INTO holds (route, origin, at) VALUES (?,?,?)",
                              (route, origin, time.time()))
        return cur.rowcount == 1

    def resume(self, route: str) -> bool:
        """Resume ``route``; False when it was not held."""
        return self.db.execute("DELETE FROM holds WHERE route=?", (route,)).rowcount == 1

    def holds(self) -> dict[str, tuple[str, float]]:
        """The held routes: (who held it, when), by route."""
        return {r: (o, float(a)) for r, o, a in self.db.execute("SELECT route, origin, at FROM holds")}

    def claim_failed(self, key: str, note: str) -> bool:
        """A ``failed`` hand-off taken back to ``transformed`` for a retry; False when it is not failed
        (any more): of two retries, one wins."""
        return self.db.execute(
            "UPDATE handoffs SET state='transformed', note=?, updated=? WHERE key=? AND state='failed'",
            (redact(note), time.time(), key)).rowcount == 1

    # ---- how far each tile was followed (catch-up after a restart) ----------------------------------------

    def followed_until(self, tile: str) -> float | None:
        """Up to when (epoch seconds) a run of batonpass followed ``tile``: every turn that ended before
        was seen. None: no run ever followed it (what its agent did before is history, not news)."""
        row = self.db.execute("SELECT followed_until FROM tiles WHERE tile=?", (tile,)).fetchone()
        return None if row is None else float(row[0])

    def oldest_unrouted(self, tile: str, after: float) -> float | None:
        """When the oldest turn of ``tile`` seen after ``after`` but not yet routed was reported (a crash
        came between): the catch-up must look back at least that far to report it again."""
        row = self.db.execute("SELECT min(at) FROM completions WHERE tile=? AND routed=0 AND at>=?",
                              (tile, after)).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def mark_followed(self, tiles: list[str], until: float) -> None:
        """``tiles`` were followed up to ``until`` (never moves a tile's mark back)."""
        with self._tx():
            for tile in tiles:
                self.db.execute(
                    "INSERT INTO tiles (tile, followed_until) VALUES (?,?) ON CONFLICT (tile) DO UPDATE"
                    " SET followed_until=max(followed_until, excluded.followed_until)",
                    (tile, until),
                )

    # ---- hops (so a loop's count survives a restart) -------------------------------------------------------

    def push_hop(self, tile: str, hop: int) -> None:
        self.db.execute("INSERT INTO hops (tile, hop, at) VALUES (?,?,?)", (tile, hop, time.time()))

    def pop_hop(self, tile: str) -> int | None:
        with self._tx():
            row = self.db.execute(
                "SELECT id, hop FROM hops WHERE tile=? ORDER BY id LIMIT 1", (tile,)
            ).fetchone()
            if row is None:
                return None
            self.db.execute("DELETE FROM hops WHERE id=?", (row[0],))
            return int(row[1])

    def _tx(self) -> _Transaction:
        return _Transaction(self.db)


_COLUMNS = (
    "key, route, source, target, turn_id, hop, state, response, prompt, attempts, last_error, note, pane,"
    " created, updated, usage"
)
_ACTION_COLUMNS = "id, kind, target, origin, host, outcome, message, created, updated"
#: columns added after the first release, and their types
_ADDED_COLUMNS = {"usage": "TEXT"}


def _record(row: tuple[Any, ...]) -> HandoffRecord:
    try:
        usage = json.loads(row[-1]) if row[-1] else None
    except (TypeError, ValueError):  # not written by batonpass: no use known, and no traceback
        usage = None
    return replace(HandoffRecord(*row[:-1]), usage=usage if isinstance(usage, dict) else None)


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            try:
                self.db.execute("COMMIT")
                return
            except sqlite3.Error:  # a full disk, say: nothing of the transaction stays
                self._rollback()
                raise
        self._rollback()

    def _rollback(self) -> None:
        """Undo what is open; SQLite may have rolled it back itself (a full disk, an I/O error), and the
        error that got here is the one to see."""
        if self.db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")


