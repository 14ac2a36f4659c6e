"""``baton send``: one pane, typed into exactly as the daemon does — a thin front over
:mod:`pipeline.engine.send` (which pane and which agent: :mod:`pipeline.engine.pane_target`).

A pane that is gone, runs no agent of the kind expected, is busy or holds a draft is refused: one line, exit
1, nothing typed. ``--wait SECONDS`` waits for a busy agent or a draft as the dispatcher does; only
``--force`` types into whatever runs there. Each send is journaled as the web page's is: its action (``send``
from ``cli``: ``done`` or ``refused``, and the line it said), then, once something is typed, its hand-off of
route ``send`` (:mod:`pipeline.engine.send_record`); a journal that cannot be written is said in one line and
the send goes on.

Ctrl-C (exit 130) says in one line whether anything was typed. Once the paste has begun, a first Ctrl-C
lets the Enter that submits it go out (a paste is never left half done in an agent's input) and the turn's
confirmation end (at most the adapter's ``confirm_timeout_s``); a second one stops at once, saying what may
be left in the pane.

Text from outside (an argument, standard input, a file) is capped at
:data:`~pipeline.cmdline.options.MAX_INPUT_BYTES` before anything else happens, so a runaway pipe is refused
instead of filling a pane.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator

import anyio

from pipeline.cmdline.options import InputTooLarge, check_size, read_input
from pipeline.cmdline.target import target_setup
from pipeline.engine.context import pane_lookups_shared
from pipeline.engine.hosts import local_host
from pipeline.engine.pane_target import Setup, TargetError
from pipeline.engine.send import Progress, SendAsk, Sent, send, text_problem
from pipeline.engine.send_record import SendRecord
from pipeline.system.tmux import TmuxError

__all__ = ["send_command"]

#: the exit status of each way a send ends
_STATUS: dict[Sent, int] = {"typed": 0, "refused": 1, "failed": 1, "interrupted": 130}


def _err(line: str) -> None:
    print(f"baton send: {line}", file=sys.stderr)


def send_command(args: argparse.Namespace) -> int:
    """``baton send``: 0 typed; 1 refused or failed (nothing typed, said in one line); 2 a contradicting
    ``--agent``; 130 Ctrl-C (one line says whether anything was typed)."""
    try:
        text = read_input(sys.stdin, "standard input") if args.text == "-" else args.text
        if args.text != "-":
            check_size(len(os.fsencode(args.text)), "the text")
    except InputTooLarge as exc:
        _err(str(exc))
        return 1
    problem = text_problem(text, "standard input" if args.text == "-" else "the text")
    if problem:
        _err(problem)
        return 1
    progress, record = Progress(to_err=_err, to_out=print), SendRecord()
    record.warn = _err
    ask = SendAsk(args.pane, args.agent, args.wait, args.force)
    try:
        setup = target_setup(args)
        if setup is None:
            return 1
        record.start_action(uuid.uuid4().hex, args.pane, "cli", local_host())
        return _STATUS[anyio.run(lambda: _send_under_ctrl_c(ask, text, setup, progress, record))]
    except KeyboardInterrupt:  # before send listened for it, or after: nothing was typed unless it said so
        if not progress.said:
            progress.say(_nothing_typed(progress))
        return 130
    except TargetError as exc:
        progress.say(str(exc))
        return exc.status
    except TmuxError as exc:  # no such pane, no server: main() says it
        progress.line = str(exc)
        raise
    finally:
        record.end_action(progress.typed, progress.line)
        record.close()


def _nothing_typed(progress: Progress) -> str:
    return "interrupted; nothing was typed" + (f" into {progress.where}" if progress.where else "")


async def _send_under_ctrl_c(ask: SendAsk, text: str, setup: Setup, progress: Progress,
                             record: SendRecord) -> Sent:
    sent: Sent = "interrupted"
    error = None
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_on_ctrl_c, signals, tg.cancel_scope, progress)
            try:
                with pane_lookups_shared():  # as the dispatcher: one pane lookup for its check and the paste
                    sent = await send(ask, text, setup, progress, record)
            except Exception as exc:  # raised as itself, not in the task group's exception group
                error = exc
            tg.cancel_scope.cancel()
    if error is not None:
        raise error
    if progress.presses and not progress.said:  # stopped before anything was typed
        progress.say(_nothing_typed(progress))
    return sent


async def _on_ctrl_c(signals: AsyncIterator[int], scope: anyio.CancelScope, progress: Progress) -> None:
    """Before the paste, Ctrl-C stops the send; once it began, the paste and its Enter finish first
    (the typing is shielded); a second Ctrl-C stops that too."""
    async for _ in signals:
        progress.presses += 1
        if progress.typing is None:
            scope.cancel()
        elif progress.presses > 1:
            progress.typing.shield = False
            progress.typing.cancel()


