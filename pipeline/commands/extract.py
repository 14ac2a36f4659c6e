"""``baton extract``: the last finished turn's answer from an agent's file.

Whose file it is: ``--agent NAME``, else the adapter that recognizes the file's shape
(:meth:`~pipeline.plugin.agents.AgentAdapter.recognizes_file`: a Claude Code transcript, a Codex rollout, an
OpenCode store, a Gemini CLI session file, a Copilot CLI events.jsonl, a demo agent's transcript, or a
plugin's kind; each adapter knows its own files and no other agent's), else Claude Code's. When the agent
named cannot read the file and another adapter recognizes it, the error says which (``use --agent codex``)."""

from __future__ import annotations

import argparse
import os
import sqlite3
import stat
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipeline.cmdline.output import json_text
from pipeline.plugin.agents import AgentAdapter
from pipeline.plugin.manager import Registries

__all__ = ["DEFAULT_AGENT", "extract_answer", "extract_command", "extract_options", "whose_file"]

#: the agent a file no adapter recognizes is read as (the command's default before files were recognized)
DEFAULT_AGENT = "claude"


def _regular_file(path: Path) -> str:
    """Why ``path`` cannot be read as an agent's file ("" if it can). A FIFO or a device is refused
    without opening it: opening a FIFO waits for a writer that may never come."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"{path}: no such file"
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if stat.S_ISDIR(mode):
        return f"{path} is a folder; give the transcript, rollout or store file in it"
    if not stat.S_ISREG(mode):
        return f"{path} is not a regular file (a pipe, socket or device); give a transcript file"
    if not os.access(path, os.R_OK):
        return f"{path}: permission denied"
    return ""


def extract_options(cls: type[AgentAdapter], given: list[tuple[str, str, str]]) -> dict[str, Any]:
    """The keyword arguments of ``cls.extract_file`` from ``given`` (flag, name, value), validated with the
    adapter's :attr:`~AgentAdapter.ExtractOptions`; raises ValueError naming the flag that is wrong."""
    fields = cls.ExtractOptions.model_fields
    for flag, name, _ in given:
        if name not in fields:
            takes = ", ".join(fields) or "none"
            raise ValueError(f"{flag} is not an option for {cls.name} files (its options: {takes})")
    raw = {name: value for _, name, value in given}
    try:
        model = cls.ExtractOptions.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ValueError(f"--option {where}: {err['msg']}") from None
    return {name: getattr(model, name) for name in raw}


def whose_file(registries: Registries, path: Path) -> list[str]:
    """The agents whose adapter recognizes ``path`` by its shape (a plugin's that raises does not)."""
    names = []
    for name in registries.agents.names():
        try:
            if registries.agents.get(name).recognizes_file(path):
                names.append(name)
        except Exception:  # someone else's code: a recognizer that fails recognizes nothing
            continue
    return names


def _hint(registries: Registries, agent: str, claimed: list[str]) -> str:
    """``; it is a Codex rollout: use --agent codex`` when the file is another agent's ("" otherwise)."""
    if agent in claimed or not claimed:
        return ""
    cls = registries.agents.get(claimed[0])
    return f"; it is {cls.file_kind or f'a {cls.name} file'}: use --agent {cls.name}"


def _read(cls: type[AgentAdapter], path: Path, options: dict[str, Any]) -> tuple[Any, str]:
    """(the Response or None, "") or (None, why it could not be read)."""
    try:
        return cls.extract_file(path, **options), ""
    except (LookupError, NotImplementedError, ValueError) as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"{path}: {exc.strerror or exc}"
    except sqlite3.Error as exc:  # not an SQLite store at all (opencode)
        return None, f"{path} is not a {cls.name} file ({type(exc).__name__}: {exc})"


def extract_answer(registries: Registries, path: Path, agent: str | None, given: list[tuple[str, str, str]],
                   as_json: bool) -> int:
    """``baton extract``: ``given`` holds the options as (flag, name, value), for the adapter's
    ``ExtractOptions``; ``agent`` None: the one that recognizes the file (see the module)."""
    if agent is not None:
        registries.agents.get(agent)  # an unknown agent: UnknownName, one line from main()
    if why := _regular_file(path):
        print(f"baton extract: {why}", file=sys.stderr)
        return 1
    claimed = whose_file(registries, path)
    agent = agent or (claimed[0] if claimed else DEFAULT_AGENT)
    cls = registries.agents.get(agent)
    try:
        options = extract_options(cls, given)
    except ValueError as exc:
        print(f"baton extract: {exc}", file=sys.stderr)
        return 1
    response, why = _read(cls, path, options)
    if response is None:
        print(f"baton extract: {why or f'{path} holds no finished turn'}{_hint(registries, agent, claimed)}",
              file=sys.stderr)
        return 1
    if as_json:
        c = response.completion
        print(json_text({"text": response.text, "turn_id": c.turn_id, "outcome": c.outcome,
                         "source": response.source, "cwd": response.cwd, "agent": agent}))
    else:
        sys.stdout.write(response.text if response.text.endswith("\n") else response.text + "\n")
    return 0


def extract_command(args: argparse.Namespace) -> int:
    from pipeline.plugin.manager import load_registries

    options = [("--session", "session", args.session)] if args.session else []
    options += [(f"--option {name}", name, value) for name, value in args.option]
    return extract_answer(load_registries(), args.file, args.agent, options, args.json)
