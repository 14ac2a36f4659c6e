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

Its parts, one module each: ``schema`` (the tables, upgrades of an older file, the connection), ``records``
(what callers read: states, records, the history filter), ``handoffs`` (completions and hand-offs),
``actions`` (people's actions and held routes), ``tiles`` (each tile's followed-until mark and hop counts),
``prune`` (what is forgotten after 30 days), ``faults`` (a journal that cannot be written) and ``core``
(:class:`Journal`, made of those parts).
"""

from pipeline.engine.journal.core import Journal, open_journal
from pipeline.engine.journal.faults import JournalUnusable, check_folder, describe, is_fault
from pipeline.engine.journal.prune import FINISHED_GROUPS, KEEP_S, PRUNE_EVERY_S
from pipeline.engine.journal.records import (
    FINAL_STATES,
    STATES,
    ActionRecord,
    HandoffRecord,
    HandoffState,
    HistoryFilter,
)
from pipeline.engine.journal.schema import MEMORY, default_journal_path

__all__ = ["FINAL_STATES", "FINISHED_GROUPS", "KEEP_S", "MEMORY", "PRUNE_EVERY_S", "STATES", "ActionRecord",
           "HandoffRecord", "HandoffState", "HistoryFilter", "Journal", "JournalUnusable", "check_folder",
           "default_journal_path", "describe", "is_fault", "open_journal"]
