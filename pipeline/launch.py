"""The ``baton`` console script: the CLI imported under a Ctrl-C guard.

Importing :mod:`pipeline.cli` takes ~150 ms (anyio, pydantic and the commands). A Ctrl-C in that time
ended in a traceback of whichever import it landed in, where the CLI promises exit status 130 and never a
traceback. This module imports nothing of its own, so the guard is in place from the script's first line.
"""

from __future__ import annotations

__all__ = ["main"]


def main() -> int:
    try:
        from pipeline.cli import main as cli_main
    except KeyboardInterrupt:  # Ctrl-C while baton was still loading
        return 130
    return cli_main()
