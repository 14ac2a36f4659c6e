"""The engine's low-level helpers that plugins use, re-exported so that a plugin imports from
``pipeline.plugin`` only (the modules behind these may move; this list is what plugins may rely on).

- ``proc``: one reader of ``/proc`` (a pane's process tree, a process's start time, environ, cwd, cmdline),
  and ``proc.woken_on_exit``: a follower's subscription woken when its agent exits (a pidfd, no timer);
- ``strip_ansi`` / ``sanitize``: a screen's text without escapes; text made safe to type into a pane;
- ``AppendedLines``, ``json_object``: reading what an agent appends to a JSON-lines file, and one record;
  ``json_head``: the records at a JSON-lines file's start (for ``AgentAdapter.recognizes_file``);
  ``iso_time``: a record's ISO 8601 timestamp as epoch seconds (None when malformed); ``write_json``: an
  agent's settings file written whole or not at all (``install_hooks``);
- ``shows_text``, ``line_count``, ``utf16_length``: whether an input line shows a pasted text inline, a
  paste's lines and its length as agents count them (an adapter's ``shows_paste`` adds its agent's
  placeholder rule);
- ``Subscription``: what ``ctx.watcher.subscribe`` returns, the shared file watcher's hints (for type hints;
  :mod:`pipeline.plugin.watcher` holds its shape).
"""

from __future__ import annotations

from pipeline.plugin.pastes import line_count, shows_text, utf16_length
from pipeline.plugin.watcher import Subscription
from pipeline.system import proc
from pipeline.system.jsonl import AppendedLines, iso_time, json_head, json_object, write_json
from pipeline.system.text import sanitize, strip_ansi

__all__ = ["AppendedLines", "Subscription", "iso_time", "json_head", "json_object", "line_count", "proc",
           "sanitize", "shows_text", "strip_ansi", "utf16_length", "write_json"]
