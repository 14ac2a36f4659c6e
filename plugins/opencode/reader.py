"""OpenCode's SQLite store, read safely: where it is, and the queries for sessions, turns and answers.

OpenCode (docs/agents.md, OpenCode) keeps every session in ``$XDG_DATA_HOME/opencode/opencode.db``
(``OPENCODE_DB`` overrides it: an absolute path as is, a relative one under the data folder), in WAL mode with
the WAL often not checkpointed. So the store is opened **read-only, in place** (``file:…?mode=ro``): a copy of
the ``.db`` without its ``-wal`` would miss the newest turns. Every read is one short transaction (a
consistent snapshot of messages and parts, released at once so OpenCode's checkpoints are never held up);
``SQLITE_BUSY`` is waited out and retried; a schema this module does not know raises :class:`UnknownSchema`
instead of guessing.

What the rows mean — a turn, when it is finished, its answer — is :mod:`plugins.opencode.turns`'s.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pipeline.plugin.events import Outcome
from pipeline.plugin.usage import SessionUsage
from plugins.opencode.turns import (
    MessageRow,
    SessionRow,
    TurnEnd,
    is_final,
    newest_turn_open,
    part_text,
    turn_ends,
)
from plugins.opencode.usage import session_usage

__all__ = [
    "OpenCodeStore",
    "SessionLook",
    "StoreBusy",
    "StoreError",
    "StoreMissing",
    "UnknownSchema",
    "is_store",
    "store_path",
]

T = TypeVar("T")

#: the tables and columns this module reads; anything else in the store is ignored
REQUIRED_COLUMNS: dict[str, frozenset[str]] = {
    "session": frozenset({"id", "directory", "parent_id", "time_created", "time_updated"}),
    "message": frozenset({"id", "session_id", "time_created", "data"}),
    "part": frozenset({"id", "message_id", "data"}),
}
#: the first bytes of every SQLite database file
SQLITE_HEADER = b"SQLite format 3\x00"


def is_store(path: Path) -> bool:
    """Whether ``path`` is an SQLite file holding OpenCode's tables (``baton extract`` without ``--agent``):
    its header is read first, so a file of another kind is never opened as a database."""
    try:
        with open(path, "rb") as f:
            if f.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
                return False
        store = OpenCodeStore(Path(path))
        try:
            store.read(lambda conn: None)  # opening it checks the schema
        finally:
            store.close()
    except (OSError, StoreError, sqlite3.Error):
        return False
    return True


#: how many of a session's newest messages one look reads: a turn that ended since the last look is in there
RECENT_MESSAGES = 64


class StoreError(OSError):
    """The store cannot be read now; the message says why and what to do."""


class StoreMissing(StoreError):
    """No store file (yet): OpenCode creates it on its first start."""


class StoreBusy(StoreError):
    """The store stayed locked through every retry."""


class UnknownSchema(StoreError):
    """The store is not laid out as OpenCode 1.18 lays it out (or is not a database at all)."""


def store_path(env: Mapping[str, str] | None = None) -> Path | None:
    """Where OpenCode with environment ``env`` keeps its store; None for ``OPENCODE_DB=:memory:``.

    Pass the environment of the OpenCode *process* (``/proc/PID/environ``): the daemon's own may differ.
    """
    env = os.environ if env is None else env
    home = env.get("HOME") or os.path.expanduser("~")
    xdg = env.get("XDG_DATA_HOME")
    data = (Path(xdg) if xdg and os.path.isabs(xdg) else Path(home) / ".local" / "share") / "opencode"
    override = env.get("OPENCODE_DB")
    if override:
        if override == ":memory:":
            return None
        return Path(override) if os.path.isabs(override) else data / override
    default = data / "opencode.db"
    if not default.exists():
        # builds from another release channel name their store opencode-CHANNEL.db
        channel = sorted(data.glob("opencode-*.db"), key=lambda p: p.stat().st_mtime, reverse=True)
        if channel:
            return channel[0]
    return default


# ---- the store -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionLook:
    """What one read of a session shows (:meth:`OpenCodeStore.look`)."""

    #: the turns that ended since the time asked, oldest first
    ends: list[TurnEnd]
    #: whether the newest user message still waits for its turn to end
    open_turn: bool
    #: the newest user message's id
    newest_user: str | None


@dataclass
class OpenCodeStore:
    """One store file, opened read-only on first use. Thread-safe: calls are serialised on one connection,
    each one a short read transaction. Call from worker threads (``anyio.to_thread.run_sync``)."""

    path: Path
    busy_timeout_s: float = 0.25
    retries: int = 8
    _conn: sqlite3.Connection | None = field(default=None, init=False, repr=False)
    _inode: tuple[int, int] | None = field(default=None, init=False, repr=False)
    _columns: dict[str, frozenset[str]] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def uri(self) -> str:
        return "file:" + urllib.request.pathname2url(str(Path(self.path).absolute())) + "?mode=ro"

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn, self._inode = None, None

    def _connection(self) -> sqlite3.Connection:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._drop()
            raise StoreMissing(
                f"{self.path} does not exist (OpenCode creates it when it first starts)"
            ) from None
        if self._conn is not None and self._inode == (st.st_dev, st.st_ino):
            return self._conn
        self._drop()  # first use, or the file was replaced: the old handle would read a ghost
        conn = sqlite3.connect(self.uri(), uri=True, timeout=self.busy_timeout_s, isolation_level=None,
                               check_same_thread=False)
        conn.text_factory = _text  # a damaged store may hold bytes that are not UTF-8 anywhere
        try:
            self._check_schema(conn)
        except BaseException:
            conn.close()
            raise
        self._conn, self._inode = conn, (st.st_dev, st.st_ino)
        return conn

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        try:
            columns = {table: frozenset(r[1] for r in conn.execute(f"PRAGMA table_info({table})"))
                       for table in REQUIRED_COLUMNS}
        except sqlite3.DatabaseError as exc:
            if _busy(exc):
                raise
            raise UnknownSchema(f"{self.path} is not a readable SQLite database ({exc})") from None
        except UnicodeDecodeError:  # SQLite's own error message quoting a damaged schema's bytes
            raise UnknownSchema(f"{self.path} is not a readable SQLite database (a damaged schema)") from None
        if not any(columns.values()):  # a fresh OpenCode makes the file seconds before its tables
            raise StoreMissing(f"{self.path} has no tables yet (OpenCode makes them a moment after the file)")
        missing = [f"{t}.{c}" for t, need in REQUIRED_COLUMNS.items() for c in sorted(need - columns[t])]
        if missing:
            raise UnknownSchema(
                f"{self.path} does not look like OpenCode 1.18's store: no {', '.join(missing)}"
            )
        self._columns = columns

    def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``query`` in one read transaction, retrying while the store is locked."""
        delay = 0.02
        with self._lock:
            for attempt in range(self.retries + 1):
                try:
                    return self._read_once(query)
                except sqlite3.OperationalError as exc:  # only a locked store gets here
                    if attempt < self.retries:
                        time.sleep(delay)
                        delay = min(delay * 2, 0.5)
                        continue
                    raise StoreBusy(
                        f"{self.path} stayed locked ({exc}) through {self.retries} retries"
                    ) from None
        raise AssertionError("unreachable")

    def _read_once(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """``query`` in one read transaction. A locked store raises sqlite3's own error (to retry); every
        other failure is a :class:`StoreError` that says what is wrong with the store."""
        try:
            conn = self._connection()
            conn.execute("BEGIN")
            try:
                return query(conn)
            finally:
                if conn.in_transaction:  # a read transaction: nothing to keep, release at once
                    conn.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            if _busy(exc):
                raise
            raise self._operational_error(exc) from None
        except sqlite3.DatabaseError as exc:
            self._drop()
            raise UnknownSchema(f"{self.path} is not a readable SQLite database ({exc})") from None
        except UnicodeDecodeError:
            self._drop()
            raise UnknownSchema(f"{self.path} is not a readable SQLite database (damaged text)") \
                from None
        except ValueError:  # a damaged page can leave text in a number column (SQLite keeps it)
            self._drop()
            raise UnknownSchema(f"{self.path} is not a readable SQLite database (text where a "
                                "number belongs)") from None

    def _operational_error(self, exc: sqlite3.OperationalError) -> StoreError:
        """What an error other than a lock says about the store (a table gone, the file gone, ...)."""
        if "no such" in str(exc):
            self._drop()
            return UnknownSchema(f"{self.path}: {exc} (a newer OpenCode?)")
        if "unable to open" in str(exc):
            self._drop()
            return StoreMissing(f"{self.path} cannot be opened: {exc}")
        return StoreError(f"{self.path}: {exc}")

    # ---- queries ---------------------------------------------------------------------------------

    def sessions(self, directory: str | Sequence[str] | None = None, *, since_ms: int = 0, limit: int = 20,
                 prompts: int = 3) -> list[SessionRow]:
        """Top-level sessions (not sub-agents') updated since ``since_ms``, most recently updated first; in
        ``directory`` (one path, or any of several spellings of it) if given."""
        folders = (directory,) if isinstance(directory, str) else tuple(directory or ())

        def query(conn: sqlite3.Connection) -> list[SessionRow]:
            where = ["parent_id IS NULL", "time_updated >= ?"]
            args: list[object] = [since_ms]
            if "time_archived" in self._columns["session"]:
                where.append("time_archived IS NULL")
            if directory is not None:
                where.append(f"directory IN ({', '.join('?' * len(folders)) or 'NULL'})")
                args.extend(folders)
            title = "title" if "title" in self._columns["session"] else "''"
            rows = conn.execute(f"SELECT id, directory, {title}, time_created, time_updated FROM session "
                                f"WHERE {' AND '.join(where)} ORDER BY time_updated DESC, id LIMIT ?",
                                (*args, limit)).fetchall()
            return [SessionRow(id=r[0], directory=r[1], title=r[2] or "", created_ms=int(r[3] or 0),
                               updated_ms=int(r[4] or 0), **_prompts(conn, r[0], prompts)) for r in rows]

        return self.read(query)

    def session(self, session_id: str) -> SessionRow | None:
        def query(conn: sqlite3.Connection) -> SessionRow | None:
            r = conn.execute("SELECT id, directory, time_created, time_updated FROM session WHERE id = ?",
                             (session_id,)).fetchone()
            return (
                None
                if r is None
                else SessionRow(
                    id=r[0], directory=r[1], title="", created_ms=int(r[2] or 0), updated_ms=int(r[3] or 0)
                )
            )

        return self.read(query)

    def messages(self, session_id: str, limit: int = RECENT_MESSAGES) -> list[MessageRow]:
        """The session's newest ``limit`` messages, oldest first."""
        return self.read(lambda conn: _messages(conn, session_id, limit))

    def turn_end(self, message_id: str) -> TurnEnd | None:
        """The finished turn whose final message is ``message_id`` (None if it is not one, or not yet)."""

        def query(conn: sqlite3.Connection) -> TurnEnd | None:
            row = conn.execute("SELECT id, session_id, time_created, data FROM message WHERE id = ?",
                               (message_id,)).fetchone()
            if row is None:
                return None
            message = MessageRow.from_row(row)
            later = conn.execute(
                "SELECT id, session_id, time_created, data FROM message WHERE session_id = ? "
                "AND time_created >= ? AND id != ?",
                (message.session_id, message.created_ms, message.id),
            ).fetchall()
            if any(MessageRow.from_row(r).parent_id == message.parent_id for r in later) or not is_final(
                message
            ):
                return None  # a later step of the same turn exists: this one did not end it
            return _turn_end(conn, message)

        return self.read(query)

    def finished_turns(self, session_id: str, *, since_ms: int = 0) -> list[TurnEnd]:
        """Turns of the session that ended at or after ``since_ms``, oldest first, in one snapshot."""
        return self.look(session_id, since_ms=since_ms).ends

    def state(self, session_id: str) -> tuple[bool, str | None]:
        """(is a turn still open, the newest user message's id) — for busy checks and start confirmation."""
        look = self.look(session_id, since_ms=None)
        return look.open_turn, look.newest_user

    def look(self, session_id: str, *, since_ms: int | None = 0) -> SessionLook:
        """The session's turns that ended at or after ``since_ms`` (None: none asked for) and whether a turn
        is open, from ONE snapshot. A follower must not ask the two in separate reads: a turn that ends
        between them reads as neither finished nor open, and its store write's hint is already spent."""

        def query(conn: sqlite3.Connection) -> SessionLook:
            messages = _messages(conn, session_id, RECENT_MESSAGES)
            users = [m for m in messages if m.role == "user"]
            ended = [] if since_ms is None else [
                m for m in turn_ends(messages) if (m.completed_ms or 0) >= since_ms
            ]
            return SessionLook(
                ends=[end for m in ended if (end := _turn_end(conn, m)) is not None],
                open_turn=newest_turn_open(messages),
                newest_user=users[-1].id if users else None,
            )

        return self.read(query)

    def usage(self, session_id: str) -> SessionUsage | None:
        """The session's tokens and cost so far, as OpenCode recorded them (:mod:`plugins.opencode.usage`)."""
        return self.read(lambda conn: session_usage(conn, session_id))

    def running_turn_start(self, session_id: str) -> float | None:
        """When the session's running turn began (its user message's ``time_created``, epoch seconds); None
        when no turn runs."""

        def query(conn: sqlite3.Connection) -> float | None:
            messages = _messages(conn, session_id, RECENT_MESSAGES)
            users = [m for m in messages if m.role == "user"]
            if not users or not newest_turn_open(messages):
                return None
            return max(users, key=lambda m: (m.created_ms, m.id)).created_ms / 1000 or None

        return self.read(query)

    def recent_prompts(self, session_id: str, count: int = 5) -> tuple[str, ...]:
        """The texts of the session's newest ``count`` user messages, newest first (after a crash: did a
        prompt arrive?)."""
        return self.read(lambda conn: _prompts(conn, session_id, count)["recent_prompts"])

    def last_turn(self, session_id: str) -> TurnEnd | None:
        """The newest finished turn of the session (``baton extract``)."""

        def query(conn: sqlite3.Connection) -> TurnEnd | None:
            for message in reversed(turn_ends(_messages(conn, session_id, 1000))):
                end = _turn_end(conn, message)
                if end is not None:
                    return end
            return None

        return self.read(query)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _messages(conn: sqlite3.Connection, session_id: str, limit: int) -> list[MessageRow]:
    rows = conn.execute("SELECT id, session_id, time_created, data FROM message WHERE session_id = ? "
                        "ORDER BY time_created DESC, id DESC LIMIT ?", (session_id, limit)).fetchall()
    return [MessageRow.from_row(r) for r in reversed(rows)]


def _turn_end(conn: sqlite3.Connection, message: MessageRow) -> TurnEnd | None:
    rows = conn.execute("SELECT data FROM part WHERE message_id = ? ORDER BY id", (message.id,)).fetchall()
    text, running = part_text(rows)
    if running and message.error is None:
        return None
    outcome: Outcome = "failed" if message.error is not None else "completed"
    detail = message.error or ("" if message.finish == "stop" else f"finish {message.finish}")
    return TurnEnd(turn_id=message.id, session_id=message.session_id, user_id=message.parent_id or "",
                   outcome=outcome, text=text, completed_ms=message.completed_ms or 0, cwd=message.cwd,
                   detail=detail)


def _prompts(conn: sqlite3.Connection, session_id: str, count: int) -> dict[str, Any]:
    users = [m for m in reversed(_messages(conn, session_id, RECENT_MESSAGES)) if m.role == "user"]
    texts = []
    for user in users[:count]:
        rows = conn.execute("SELECT data FROM part WHERE message_id = ? ORDER BY id", (user.id,)).fetchall()
        texts.append(part_text(rows)[0])
    return {"recent_prompts": tuple(texts), "newest_user": users[0].id if users else None}
