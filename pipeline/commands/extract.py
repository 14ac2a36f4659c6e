"""``baton extract``: the last finished turn's answer from an agent's file."""

from __future__ import annotations

import argparse
import os
import sqlite3
import stat
import sys
from pathlib import Path

from pipeline.commands.table import json_text
from pipeline.plugin.manager import Registries

__all__ = ["extract_answer", "extract_command"]


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


def extract_answer(registries: Registries, path: Path, agent: str, session: str | None, as_json: bool) -> int:
    cls = registries.agents.get(agent)  # an unknown agent: UnknownName, one line from main()
    if why := _regular_file(path):
        print(f"baton extract: {why}", file=sys.stderr)
        return 1
    options = {"session": session} if session else {}  # only stores of many sessions take it
    try:
        response = cls.extract_file(path, **options)
    except (LookupError, NotImplementedError, ValueError) as exc:
        print(f"baton extract: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"baton extract: {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except TypeError:
        if not options:
            raise
        print(f"baton extract: --session is not an option for {agent} files", file=sys.stderr)
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

    return extract_answer(load_registries(), args.file, args.agent, args.session, args.json)
