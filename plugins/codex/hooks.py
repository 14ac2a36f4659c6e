"""Codex's ``notify`` hook: what it sends (:func:`notify_turn`), and ``baton hooks install --codex``, which
points it at batonpass while keeping the user's config.

``$CODEX_HOME/config.toml`` is the user's file, comments and layout included, so it is edited as text:
the top-level ``notify = [...]`` is replaced (or added before the first table), nothing else is touched.
The standard library reads TOML but does not write it, so the edit is checked by parsing the result:
``notify`` must be the new command and every other key exactly what it was, or nothing is written.

A ``notify`` program already there keeps running: the new command is
``python -m pipeline.spool codex --then <the previous program...>``, and the spool runs the previous program
with the same JSON argument after recording it. Installing twice changes nothing.
"""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["install_notify", "notify_turn", "toml_array"]

SPOOL_MODULE = "pipeline.spool"


def notify_turn(payload: dict[str, Any]) -> tuple[str, str, str | None] | None:
    """(thread id, turn id, answer) from a Codex ``notify`` payload (``agent-turn-complete``) or a trusted
    ``hooks.json`` Stop hook's stdin; None for anything else (other hook events, malformed records)."""
    if payload.get("type") == "agent-turn-complete":
        thread, turn, text = (
            payload.get("thread-id"),
            payload.get("turn-id"),
            payload.get("last-assistant-message"),
        )
    elif payload.get("hook_event_name") == "Stop":
        thread, turn, text = (
            payload.get("session_id"),
            payload.get("turn_id"),
            payload.get("last_assistant_message"),
        )
    else:
        return None
    if not isinstance(thread, str) or not isinstance(turn, str) or not thread or not turn:
        return None
    return thread, turn, text if isinstance(text, str) else None


def toml_array(items: list[str]) -> str:
    """A TOML array of basic strings. JSON string escapes are TOML's, except that TOML wants DEL escaped
    and forbids surrogate escapes (hence ``ensure_ascii=False``)."""
    return "[" + ", ".join(json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f") for s in items) + "]"


def _is_ours(command: list[str]) -> bool:
    return any(command[i] == "-m" and command[i + 1] == SPOOL_MODULE for i in range(len(command) - 1))


def _previous(command: list[str]) -> list[str]:
    """What a batonpass notify command chains to (after ``--then``)."""
    return command[command.index("--then") + 1:] if "--then" in command else []


def install_notify(config_path: Path, hook_command: list[str]) -> str:
    """Make ``notify`` in ``config_path`` run ``hook_command`` (then any previous program). Returns what
    was done, for the user. Raises ValueError (nothing written) when the file cannot be edited safely."""
    text = config_path.read_text(encoding="utf-8") if config_path.exists() else ""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(
            f"{config_path} is not valid TOML ({exc}); fix it first — nothing was changed"
        ) from None
    current = data.get("notify")
    if current is not None and not (isinstance(current, list) and all(isinstance(a, str) for a in current)):
        raise ValueError(f"{config_path}: notify is {current!r}, not a list of strings; nothing was changed")
    previous = _previous(current) if current and _is_ours(current) else list(current or [])
    wanted = hook_command + (["--then", *previous] if previous else [])
    restart = ("Codex reads it at start: restart Codex — in daemon mode (the default) also its daemon, "
               "`codex app-server daemon stop`.")
    if current == wanted:
        return f"{config_path}: notify already runs batonpass; nothing changed."
    line = f"notify = {toml_array(wanted)}"
    new_text = _replace_notify(text, line) if current is not None else _insert_top_level(text, line)
    _check(config_path, data, new_text, wanted)
    _write(config_path, new_text)
    if previous and not (current and _is_ours(current)):
        return (f"{config_path}: notify now runs batonpass, then your previous program "
                f"({' '.join(previous)}) with the same argument. {restart}")
    return f"{config_path}: notify runs batonpass ({' '.join(wanted)}). {restart}"


def _check(path: Path, before: dict[str, Any], new_text: str, wanted: list[str]) -> None:
    try:
        after = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: could not edit notify safely ({exc}); nothing was changed — add "
                         f"notify = {toml_array(wanted)} at the top by hand") from None
    rest_before = {k: v for k, v in before.items() if k != "notify"}
    rest_after = {k: v for k, v in after.items() if k != "notify"}
    if after.get("notify") != wanted or rest_before != rest_after:
        raise ValueError(f"{path}: could not edit notify safely; nothing was changed — add "
                         f"notify = {toml_array(wanted)} at the top by hand")


def _write(path: Path, text: str) -> None:
    """Atomically, keeping the file's mode; the previous version is kept next to it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    if path.exists():
        backup = path.with_name(path.name + ".batonpass.bak")
        backup.write_bytes(path.read_bytes())
        os.chmod(backup, mode)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---- a tiny TOML scanner: where the top-level keys end and where one value spans ---------------------


def _scan(text: str) -> list[tuple[int, int, bool]]:
    """Each line that starts at nesting depth 0 outside any string: (start offset, end offset, is a
    table header). Values may span lines (arrays, inline tables, multi-line strings); their inner lines
    are not listed."""
    lines: list[tuple[int, int, bool]] = []
    i, n, depth = 0, len(text), 0
    line_start, at_line_start = 0, True
    while i < n:
        if at_line_start:
            j = _past_blanks(text, i)
            if depth == 0:
                lines.append((line_start, -1, j < n and text[j] == "["))
            at_line_start = False
            i = j
            continue
        if text[i] == "\n":
            if depth == 0:
                _end_open_line(lines, i)
            i += 1
            line_start, at_line_start = i, True
            continue
        past = _past_comment_or_string(text, i)
        if past == i:
            depth = _depth_after(text[i], depth)
            past += 1
        i = past
    _end_open_line(lines, n)
    return lines


def _past_blanks(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _end_open_line(lines: list[tuple[int, int, bool]], at: int) -> None:
    """The last listed line, if its end is not known yet, ends at ``at``."""
    if lines and lines[-1][1] == -1:
        lines[-1] = (lines[-1][0], at, lines[-1][2])


def _depth_after(c: str, depth: int) -> int:
    """The nesting depth after the character ``c`` outside strings and comments."""
    if c in "[{":
        return depth + 1
    if c in "]}":
        return max(depth - 1, 0)
    return depth


def _past_comment_or_string(text: str, i: int) -> int:
    """The offset after the comment (up to its newline) or string that starts at ``i``; ``i`` itself when
    none starts there."""
    n, c = len(text), text[i]
    if c == "#":
        while i < n and text[i] != "\n":
            i += 1
        return i
    if text.startswith('"""', i) or text.startswith("'''", i):
        quote = text[i:i + 3]
        i += 3
        while i < n and not text.startswith(quote, i):
            i += 2 if quote == '"""' and text[i] == "\\" else 1
        i += 3
        while i < n and text[i] == quote[0]:  # up to two quotes may end the content
            i += 1
        return i
    if c in "\"'":
        i += 1
        while i < n and text[i] != c and text[i] != "\n":
            i += 2 if c == '"' and text[i] == "\\" else 1
        return i + 1
    return i


def _insert_top_level(text: str, line: str) -> str:
    """``line`` as a new top-level key: before the first table header (after the file's opening
    comments), or at the end of a file without tables."""
    lines = _scan(text)
    for k, (start, _end, header) in enumerate(lines):
        if header:
            while k > 0 and text[lines[k - 1][0]:lines[k - 1][1]].lstrip().startswith("#"):
                k -= 1  # keep a comment with the table it introduces
            start = lines[k][0]
            return text[:start] + line + "\n\n" + text[start:]
    if text and not text.endswith("\n"):
        text += "\n"
    return text + line + "\n"


def _replace_notify(text: str, line: str) -> str:
    """The top-level ``notify = ...`` (its whole value, which may span lines) replaced by ``line``;
    a comment after the value stays."""
    for start, end, header in _scan(text):
        if header:
            break
        stripped = text[start:end].lstrip()
        key = stripped.split("=", 1)[0].strip()
        if key not in ("notify", '"notify"', "'notify'") or "=" not in stripped:
            continue
        # the value ends where the logical line ends, before a trailing comment
        logical = text[start:end]
        comment = _trailing_comment(logical)
        indent = logical[: len(logical) - len(logical.lstrip())]
        return text[:start] + indent + line + (" " + comment if comment else "") + text[end:]
    raise ValueError("notify is set but not found as a top-level line (a dotted key?); nothing was changed")


def _trailing_comment(logical: str) -> str:
    """The ``# ...`` after a value on its last line, if any (outside strings)."""
    last = logical.rsplit("\n", 1)[-1]
    if "#" not in last:
        return ""
    quote, escaped = None, False
    for i, c in enumerate(last):
        if quote:
            if escaped:
                escaped = False
            elif c == "\\" and quote == '"':
                escaped = True
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#":
            return last[i:].rstrip()
    return ""
