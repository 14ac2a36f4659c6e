"""``baton extract``: the last finished turn's answer from an agent's file."""

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

__all__ = ["extract_answer", "extract_command", "extract_options"]


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


def extract_answer(registries: Registries, path: Path, agent: str, given: list[tuple[str, str, str]],
                   as_json: bool) -> int:
    """``baton extract``: ``given`` holds the options as (flag, name, value), for the adapter's
    ``ExtractOptions``."""
    cls = registries.agents.get(agent)  # an unknown agent: UnknownName, one line from main()
    try:
        options = extract_options(cls, given)
    except ValueError as exc:
        print(f"baton extract: {exc}", file=sys.stderr)
        return 1
    if why := _regular_file(path):
        print(f"baton extract: {why}", file=sys.stderr)
        return 1
    try:
        response = cls.extract_file(path, **options)
    except (LookupError, NotImplementedError, ValueError) as exc:
        print(f"baton extract: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"baton extract: {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except sqlite3.Error as exc:  # not an SQLite store at all (opencode)
        print(f"baton extract: {path} is not a {agent} file ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 1
    if response is None:
        print(f"baton extract: {path} holds no finished turn", file=sys.stderr)
        return 1
    if as_json:
        c = response.completion
        print(json_text({"text": response.text, "turn_id": c.turn_id, "outcome": c.outcome,
                         "source": response.source, "cwd": response.cwd}))
    else:
        sys.stdout.write(response.text if response.text.endswith("\n") else response.text + "\n")
    return 0


def extract_command(args: argparse.Namespace) -> int:
    from pipeline.plugin.manager import load_registries

    options = [("--session", "session", args.session)] if args.session else []
    options += [(f"--option {name}", name, value) for name, value in args.option]
    return extract_answer(load_registries(), args.file, args.agent, options, args.json)
