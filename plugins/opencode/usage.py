"""OpenCode's token use and cost, as its store records them: each assistant message's ``data`` has
``tokens`` ``{input, output, reasoning, cache: {read, write}}`` and ``cost`` (US dollars, priced by OpenCode
itself from its model list, so this adapter keeps no price table).

Shapes seen (1.18.33, tests/fixtures/opencode): ``"cost":0,"tokens":{"total":120,"input":100,"output":20,
"reasoning":0,"cache":{"write":0,"read":0}}``. ``input`` counts the input tokens that were neither read from
nor written to the cache, ``output`` leaves the reasoning tokens out (they are billed as output, so they are
added to it here). A session's sub-agent sessions (``session.parent_id``, the task tool) are counted with it,
as Claude Code's subagents are. The sums are made by SQLite in one query (``json_extract``): a store's
session may hold thousands of messages, and the board asks after every change. A row whose ``data`` is not
JSON, or a field of another shape, adds nothing.
"""

from __future__ import annotations

import sqlite3

from pipeline.plugin.usage import SessionUsage

__all__ = ["session_usage"]


def _number(path: str) -> str:
    """SQL for the non-negative number at JSON ``path`` of ``data``, 0 for anything else."""
    return (f"CASE WHEN json_type(data, '{path}') IN ('integer', 'real') "
            f"THEN max(json_extract(data, '{path}'), 0) ELSE 0 END")


_QUERY = f"""
SELECT json_extract(data, '$.modelID'),
       SUM({_number('$.tokens.input')}), SUM({_number('$.tokens.output')}),
       SUM({_number('$.tokens.reasoning')}), SUM({_number('$.tokens.cache.read')}),
       SUM({_number('$.tokens.cache.write')}), SUM({_number('$.cost')}),
       SUM(CASE WHEN json_type(data, '$.cost') IN ('integer', 'real') THEN 0 ELSE 1 END)
FROM message
WHERE session_id IN (SELECT id FROM session WHERE id = ? OR parent_id = ?)
  AND json_valid(data) AND json_extract(data, '$.role') = 'assistant'
  AND json_type(data, '$.tokens') = 'object'
GROUP BY 1
"""


def session_usage(conn: sqlite3.Connection, session_id: str) -> SessionUsage | None:
    """The tokens and cost of ``session_id`` and its sub-agents' sessions so far; None when no assistant
    message records tokens. ``cost_usd`` is None when a message that used tokens records no cost."""
    rows = conn.execute(_QUERY, (session_id, session_id)).fetchall()
    if not rows:
        return None
    inp = out = read = write = 0
    cost: float | None = 0.0
    models: list[str] = []
    for model, i, o, reasoning, r, w, dollars, unpriced in rows:
        i, o, r, w = int(i or 0), int(o or 0) + int(reasoning or 0), int(r or 0), int(w or 0)
        inp, out, read, write = inp + i, out + o, read + r, write + w
        if unpriced and i + o + r + w:
            cost = None
        elif cost is not None:
            cost += float(dollars or 0)
        if isinstance(model, str) and model and i + o + r + w and model not in models:
            models.append(model)
    return SessionUsage(input=inp, output=out, cache_read=read, cache_write=write, cost_usd=cost,
                        models=tuple(models))
