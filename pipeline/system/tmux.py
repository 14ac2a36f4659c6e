"""The tmux client: the only module in batonpass that runs tmux.

Every call names its server (``-L`` socket name, ``-S`` socket path, or the server of ``$TMUX``) and
addresses panes by id (``%N``) once resolved — never "the active pane". Text reaches a pane only through
:meth:`Tmux.paste`: loaded into a uniquely named buffer and pasted as one unit.

Commands go over one persistent control-mode connection per server (:mod:`pipeline.system.tmux_control`)
when it can serve them, else one ``tmux`` process each (no server yet, no session to attach to,
``kill-server``, ``BATON_TMUX_CONTROL=0``); callers see the same output and the same errors either way.

Its parts: what tmux says about a pane (:mod:`pipeline.system.tmux_pane`), tmux's errors
(:mod:`pipeline.system.tmux_errors`), a server's socket file (:mod:`pipeline.system.tmux_socket`); this
module names them all, as the one way in.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

import anyio

from pipeline.system.tmux_control import ControlClient, ControlUnavailable
from pipeline.system.tmux_errors import (
    PaneGone,
    ServerGone,
    TmuxError,
    error_from,
    refuse_blank_target,
    refused_reply,
)
from pipeline.system.tmux_pane import PANE_FORMAT, PaneInfo, parse_pane
from pipeline.system.tmux_socket import remove_socket_file, socket_file

__all__ = ["PaneGone", "PaneInfo", "ServerGone", "Tmux", "TmuxError", "remove_socket_file"]

_buffer_ids = itertools.count()
#: commands that never go over control mode: ``kill-server`` ends the connection before its reply; what
#: starts a program would take the control client's environment and directory (those of the moment it
#: connected) instead of this process's current ones
_SUBPROCESS_ONLY = frozenset({"kill-server", "new-session", "new-window", "split-window", "respawn-pane",
                              "respawn-window"})
#: texts larger than this are loaded from a process's stdin rather than sent as one command line
_MAX_CONTROL_TEXT = 256 * 1024
#: the control-mode connection of each server, shared by every :class:`Tmux` naming it
_controls: weakref.WeakValueDictionary[tuple[str, ...], ControlClient] = weakref.WeakValueDictionary()
#: the last window-activity list of each server, shared by every :class:`Tmux` naming it
_activity_lists: weakref.WeakValueDictionary[tuple[str, ...], _ActivityList] = weakref.WeakValueDictionary()


@dataclass(eq=False)
class _ActivityList:
    """One server's ``list-panes`` of window activity: the last one, when it came, and the one being asked."""

    seconds: dict[str, int]
    at: float = float("-inf")
    asking: anyio.Event | None = None


class Tmux:
    """One tmux server. ``socket_name`` is ``-L``; ``socket_path`` is ``-S``; with neither, the server of
    ``$TMUX`` when set, else tmux's default server."""

    def __init__(self, socket_name: str | None = None, socket_path: str | None = None, *,
                 config_file: str | None = None, control: bool | None = None) -> None:
        if socket_name is None and socket_path is None and os.environ.get("TMUX"):
            socket_path = os.environ["TMUX"].split(",")[0]
        self.socket_name, self.socket_path = socket_name, socket_path
        #: ``-f``: only read when this client starts the server (the demo and tests pass /dev/null)
        self.config_file = config_file
        #: whether commands may go over control mode (default: yes unless ``BATON_TMUX_CONTROL=0``)
        self.control = os.environ.get("BATON_TMUX_CONTROL", "1") != "0" if control is None else control
        self._control: ControlClient | None = None
        self._activity: _ActivityList | None = None

    def _control_client(self) -> ControlClient:
        if self._control is None:
            key = tuple(self.base)
            self._control = _controls.get(key)
            if self._control is None:
                self._control = _controls[key] = ControlClient(self.base)
        return self._control

    @property
    def base(self) -> list[str]:
        cmd = ["tmux"] + (["-f", self.config_file] if self.config_file else [])
        if self.socket_name:
            return cmd + ["-L", self.socket_name]
        if self.socket_path:
            return cmd + ["-S", self.socket_path]
        return cmd

    def describe(self) -> str:
        if self.socket_name:
            return f"tmux -L {self.socket_name}"
        if self.socket_path:
            return f"tmux -S {self.socket_path}"
        return "the default tmux server"

    async def run(self, *args: str, input: bytes | None = None, check: bool = True) -> str:
        refuse_blank_target(args)
        if input is None and args and args[0] not in _SUBPROCESS_ONLY:
            out = await self._over_control(args, check)
            if out is not None:
                return out
        try:  # a session of its own: a Ctrl-C typed at baton is for baton to handle, not to cut tmux short
            result = await anyio.run_process([*self.base, *args], input=input, check=False,
                                             start_new_session=True)
        except FileNotFoundError:
            raise TmuxError("tmux is not installed (no `tmux` on PATH)") from None
        if check and result.returncode != 0:
            raise error_from(result.stderr.decode("utf-8", "replace").strip(), args)
        return result.stdout.decode("utf-8", "replace")

    async def _over_control(self, args: tuple[str, ...], check: bool) -> str | None:
        """What ``tmux ARGS`` prints, over the control-mode connection; None when it cannot serve now (then
        the same command runs as a process: it works, or fails with tmux's own message)."""
        if not self.control:
            return None
        try:
            reply = await self._control_client().run(*args)
        except ControlUnavailable:
            return None
        if check and not reply.ok:
            raise refused_reply(reply, args)
        return reply.text if reply.ok else ""

    def run_sync(self, *args: str, check: bool = True) -> str:
        """For the few places outside the event loop (test fixtures, the demo's teardown)."""
        refuse_blank_target(args)
        try:
            result = subprocess.run([*self.base, *args], capture_output=True, check=False,
                                    start_new_session=True)
        except FileNotFoundError:
            raise TmuxError("tmux is not installed (no `tmux` on PATH)") from None
        if check and result.returncode != 0:
            raise error_from(result.stderr.decode("utf-8", "replace").strip(), args)
        return result.stdout.decode("utf-8", "replace")

    def server_answers(self) -> bool:
        """Whether a tmux server runs on this socket. Asked by a short-lived client, never the control-mode
        one: that would attach to a server batonpass may only look at."""
        try:
            result = subprocess.run([*self.base, "list-sessions"], capture_output=True, check=False,
                                    start_new_session=True)
        except FileNotFoundError:
            return False
        return result.returncode == 0

    # ---- panes -------------------------------------------------------------------------------------

    async def resolve(self, target: str) -> PaneInfo:
        """A tile's ``pane:`` (``%N``, ``session:window.pane`` or ``title:NAME``) → the pane."""
        if target.startswith("title:"):
            title = target.removeprefix("title:")
            matches = [p for p in await self.list_panes() if p.title == title]
            if not matches:
                raise PaneGone(f"no pane has the title {title!r} on {self.describe()}")
            if len(matches) > 1:
                ids = ", ".join(p.pane_id for p in matches)
                raise PaneGone(
                    f"{len(matches)} panes have the title {title!r} ({ids}); give each a unique title"
                )
            return matches[0]
        info = await self.pane(target)
        if ":" in target and not target.startswith("%") and not info.matches_address(target):
            raise PaneGone(f"no pane {target} on {self.describe()} (tmux would pick {info.address} instead)")
        return info

    async def pane(self, target: str) -> PaneInfo:
        return self._pane_of(target, await self.run("display-message", "-p", "-t", target, PANE_FORMAT))

    def _pane_of(self, target: str, printed: str) -> PaneInfo:
        info = parse_pane(printed.rstrip("\n"))
        if not info.pane_id:
            # tmux 3.3 answers an unknown target with empty pane fields and exit status 0
            raise PaneGone(f"can't find pane {target} on {self.describe()}")
        return info

    async def pane_and_capture(self, target: str, *, escapes: bool = False, start: int | str | None = None,
                               end: int | str | None = None) -> tuple[PaneInfo, str | None]:
        """:meth:`pane` and :meth:`capture` of the same moment in one control-mode round trip (a readiness
        check needs both, and each round trip is time between an answer and its paste). The screen is
        None when it could not be had that way (no control mode, or the capture failed): ask
        :meth:`capture` then, which fails with tmux's own message."""
        looked = ("display-message", "-p", "-t", target, PANE_FORMAT)
        refuse_blank_target(looked)
        if self.control:
            try:
                info, screen = await self._control_client().run_all(
                    looked, _capture_args(target, escapes, start, end))
            except ControlUnavailable:
                pass
            else:
                if not info.ok:
                    raise refused_reply(info, looked)
                return self._pane_of(target, info.text), screen.text if screen.ok else None
        return await self.pane(target), None

    async def window_activity(self, *, fresh_s: float) -> dict[str, int]:
        """Pane id → the second (epoch) its window last printed anything, for every pane of the server
        (tmux's ``window_activity``: set by any output, whatever ``monitor-activity`` says). One
        ``list-panes`` serves every caller within ``fresh_s`` of it: the screen followers, looking on one
        beat, learn which screens may have moved from one short reply instead of capturing each screen."""
        if self._activity is None:
            key = tuple(self.base)
            self._activity = _activity_lists.get(key)
            if self._activity is None:
                self._activity = _activity_lists[key] = _ActivityList({})
        board = self._activity
        while time.monotonic() - board.at >= fresh_s:
            if board.asking is not None:  # another caller's list; should it fail, the loop asks again
                await board.asking.wait()
                continue
            board.asking = asking = anyio.Event()
            try:
                out = await self.run("list-panes", "-a", "-F", "#{pane_id} #{window_activity}")
                board.seconds = {pane: int(second) for pane, _, second in
                                 (line.partition(" ") for line in out.splitlines()) if second.isdigit()}
                board.at = time.monotonic()
                return board.seconds
            finally:
                board.asking = None
                asking.set()
        return board.seconds

    async def list_panes(self) -> list[PaneInfo]:
        out = await self.run("list-panes", "-a", "-F", PANE_FORMAT)
        return [parse_pane(line) for line in out.splitlines() if line]

    async def panes_and_activity(self) -> dict[str, tuple[PaneInfo, int | None]]:
        """Pane id → the pane and the second (epoch) its window last printed anything (tmux's
        ``window_activity``), for every pane of the server in one ``list-panes``: the live board's slow
        look learns from one reply which tiles may have changed, instead of looking at each."""
        out = await self.run("list-panes", "-a", "-F", PANE_FORMAT + "\x1f#{window_activity}")
        listed: dict[str, tuple[PaneInfo, int | None]] = {}
        for line in out.splitlines():
            fields, _, second = line.rpartition("\x1f")
            if fields:
                info = parse_pane(fields)
                listed[info.pane_id] = (info, int(second) if second.isdigit() else None)
        return listed

    async def capture(self, pane_id: str, *, escapes: bool = False, start: int | str | None = None,
                      end: int | str | None = None) -> str:
        """The pane's text, wrapped lines joined. ``start``/``end`` are tmux line numbers (0 = top of the
        visible screen, negative = scrollback, ``"-"`` = the very start/end)."""
        return await self.run(*_capture_args(pane_id, escapes, start, end))

    # ---- typing ------------------------------------------------------------------------------------

    async def paste(self, pane_id: str, text: str) -> None:
        """Paste ``text`` (already sanitized) as one unit: bracketed if the program asked for it, LF kept
        as LF, and the uniquely named buffer deleted afterwards."""
        name = f"baton-{os.getpid()}-{next(_buffer_ids)}"
        paste = ("paste-buffer", "-p", "-r", "-d", "-b", name, "-t", pane_id)
        refuse_blank_target(paste)
        if len(text) <= _MAX_CONTROL_TEXT and self.control:
            try:  # the buffer set and pasted in one round trip
                loaded, pasted = await self._control_client().run_all(("set-buffer", "-b", name, "--", text),
                                                                      paste)
            except ControlUnavailable as exc:
                if exc.sent:  # tmux may have pasted it: never load it again, at most paste what is there
                    try:
                        await self.run(*paste)
                    except TmuxError:
                        await self.run("delete-buffer", "-b", name, check=False)
                        raise
                    return
            else:
                if not loaded.ok:
                    raise refused_reply(loaded, ("set-buffer",))
                if not pasted.ok:
                    await self.run("delete-buffer", "-b", name, check=False)
                    raise refused_reply(pasted, paste)
                return
        await self.run("load-buffer", "-b", name, "-", input=text.encode("utf-8"))
        try:
            await self.run(*paste)
        except TmuxError:
            await self.run("delete-buffer", "-b", name, check=False)
            raise

    async def send_keys(self, pane_id: str, *keys: str) -> None:
        """Named keys only (``Enter``, ``C-u``); text goes through :meth:`paste`."""
        await self.run("send-keys", "-t", pane_id, *keys)

    # ---- sessions ----------------------------------------------------------------------------------

    async def new_session(self, name: str, command: str, *, cwd: str | None = None, width: int = 160,
                          height: int = 48, env: dict[str, str] | None = None) -> PaneInfo:
        args = ["new-session", "-d", "-P", "-F", PANE_FORMAT, "-s", name, "-x", str(width), "-y", str(height)]
        args += _env_args(env) + (["-c", cwd] if cwd else [])
        return parse_pane((await self.run(*args, command)).rstrip("\n"))

    async def split(self, target: str, command: str, *, cwd: str | None = None, horizontal: bool = True,
                    env: dict[str, str] | None = None) -> PaneInfo:
        args = ["split-window", "-d", "-P", "-F", PANE_FORMAT, "-t", target, "-h" if horizontal else "-v"]
        args += _env_args(env) + (["-c", cwd] if cwd else [])
        return parse_pane((await self.run(*args, command)).rstrip("\n"))

    # ---- the person at the terminal ----------------------------------------------------------------

    async def tell_clients(self, text: str, *, seconds: float = 8.0) -> int:
        """Show ``text`` on the status line of every client attached to this server, for ``seconds`` (or
        until a key is pressed); returns how many clients were told. ``#`` is doubled: display-message
        reads its text as a format."""
        clients = [c for c in (await self.run("list-clients", "-F", "#{client_name}")).splitlines() if c]
        shown = text.replace("#", "##")
        told = 0
        for client in clients:
            try:
                await self.run("display-message", "-c", client, "-d", str(max(int(seconds * 1000), 1)), shown)
                told += 1
            except TmuxError:
                continue  # the client detached meanwhile
        return told

    async def set_title(self, pane_id: str, title: str) -> None:
        await self.run("select-pane", "-t", pane_id, "-T", title)

    @property
    def socket_file(self) -> Path:
        """Where this server's socket is (:func:`pipeline.system.tmux_socket.socket_file`)."""
        return socket_file(self.socket_name, self.socket_path)

    async def kill_server(self) -> None:
        """Stop this server, for one batonpass started (the demo's): its socket file too, which tmux 3.3
        leaves behind (each demo would leave one in /tmp/tmux-UID)."""
        await self.run("kill-server", check=False)
        await anyio.to_thread.run_sync(remove_socket_file, self.socket_file)


def _capture_args(pane_id: str, escapes: bool, start: int | str | None,
                  end: int | str | None) -> tuple[str, ...]:
    args = ["capture-pane", "-p", "-J", "-t", pane_id]
    if escapes:
        args.append("-e")
    if start is not None:
        args += ["-S", str(start)]
    if end is not None:
        args += ["-E", str(end)]
    return tuple(args)


def _env_args(env: dict[str, str] | None) -> list[str]:
    return [arg for k, v in (env or {}).items() for arg in ("-e", f"{k}={v}")]


