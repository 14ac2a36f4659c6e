"""tmux's errors, as batonpass raises them: what tmux said (its own words), told apart — no server, no such
pane — and a pane target tmux would read as "the current pane" refused before tmux runs."""

from __future__ import annotations

import re

from pipeline.system.tmux_control import Reply

__all__ = ["PaneGone", "ServerGone", "TmuxError", "error_from", "refuse_blank_target", "refused_reply"]


class TmuxError(RuntimeError):
    """tmux said no; the message is tmux's own."""


class ServerGone(TmuxError):
    """No tmux server answers on this socket."""


class PaneGone(TmuxError):
    """The pane (or the session/window named) does not exist."""


def refuse_blank_target(args: tuple[str, ...]) -> None:
    """tmux reads an empty ``-t`` as "the current pane": a pane nobody named. Refused before tmux runs,
    whichever caller built the target (a config, the command line, a plugin)."""
    for flag, value in zip(args, args[1:], strict=False):
        if flag == "-t" and not value.strip():
            raise PaneGone(f"refusing an empty pane target {value!r}: tmux would take it as the current pane")


def refused_reply(reply: Reply, args: tuple[str, ...]) -> TmuxError:
    """The error a failed control-mode reply stands for: what a ``tmux`` process would have printed."""
    return error_from("\n".join(reply.lines).strip(), args)


def error_from(stderr: str, args: tuple[str, ...]) -> TmuxError:
    """The error tmux's ``stderr`` for ``tmux ARGS`` stands for: no server, no such pane, or another."""
    if "no server running" in stderr or "error connecting to" in stderr:
        # tmux's words name the socket; a first-day user also needs to hear what to do about it
        where = re.search(r"(?:running on|connecting to) (\S+)", stderr)
        if where is None:
            return ServerGone(stderr)
        return ServerGone(f"no tmux server is running at {where.group(1)} (start tmux, or name the server "
                          "with -L NAME or -S PATH)")
    if "can't find" in stderr:
        return PaneGone(stderr)
    return TmuxError(f"tmux {' '.join(args[:1])}: {stderr}")
