"""One persistent tmux control-mode connection per server: a command and its reply in a fraction of a
millisecond instead of a ~3 ms ``tmux`` process per command. Used only by :mod:`pipeline.system.tmux`.

How it behaves, and why:

- It is ``tmux -C attach-session -f ignore-size,no-output`` on a session that exists: a control client has
  to be attached to some session, but with ``ignore-size`` its size never counts (the user's panes are never
  resized) and with ``no-output`` tmux sends it no ``%output`` of any pane. It never creates a session: with
  no server (or no session) there is no connection, and the caller runs a subprocess instead
  (:class:`ControlUnavailable`). Being attached shows: the session counts one more attached client.
- Each command line written gets exactly one ``%begin``/``%end`` (or ``%error``) block from tmux, in order,
  with flags 1; blocks with flags 0 (the attach itself, hooks) are not replies. A block ends only at the
  ``%end``/``%error`` carrying its ``%begin``'s time, number and flags. Replies are matched to commands by
  their order of writing. Calls that come while a round trip is on its way (or from tasks woken
  together) go out in the next write together; whoever writes reads the replies in order up to its own, so
  a round trip is never cancelled halfway (a caller cancelled meanwhile gets its cancellation after it).
- Pane text is not trusted: a captured line may imitate ``%end``. Commands that print are followed, in the
  same write, by a nonce (``display-message -p``); a reply counts only when the stream reaches that nonce
  cleanly. Anything out of place (text between blocks, an ``%end`` with no block, the nonce missing) drops
  the connection and the caller runs a subprocess for that command.
- The server going away (``kill-server``, the last session closed) ends the connection (EOF); the next
  command connects again, to the new server if there is one. Failed connections back off (up to 30 s).
- It uses raw pipes and ``anyio.wait_readable``/``wait_writable``, so it runs under any event loop; a call
  from another event loop than the one that connected starts a fresh connection. The client process lives
  in its own session (a Ctrl-C meant for ``baton`` does not reach it), so a signal to ``baton``'s process
  group does not reach it either.
- It never outlives this process, however this process ends. The end of its stdin is not enough: the tmux
  server (3.3) reads a control client's stdin and writes its stdout itself, and when it has a reply or a
  notification to write after the reader is gone (a ``kill -9`` that lands while a command is on its way,
  or while tmux is busy), the write fails, the output stays queued, and tmux waits for it to drain before
  it lets the client exit: forever. The client then lives on (parent 1), and ``kill-server`` never
  finishes either (the server waits for its last client and refuses every new one: "server exited
  unexpectedly"). So on Linux the client is started with ``PR_SET_PDEATHSIG`` = SIGKILL: it dies with the
  thread that started it, which is this event loop's thread (a connection belongs to one event loop), and
  tmux drops a client whose process is gone at once. A clean close still ends it by its stdin
  (:func:`_stop`), killing it if it lingers.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel

__all__ = ["ControlClient", "ControlUnavailable", "Reply", "quote"]

#: commands whose output may hold text a pane's program chose (screen, titles): checked with a nonce
PRINTING = frozenset({"capture-pane", "display-message", "list-panes", "list-windows", "list-sessions",
                      "show-buffer", "show-options", "list-buffers", "list-clients"})
#: a command this slow means tmux is stuck: the connection is dropped, the caller runs a subprocess
REPLY_TIMEOUT_S = 5.0
MAX_BACKOFF_S = 30.0


class ControlUnavailable(Exception):
    """Control mode cannot serve this command now; run it as a subprocess. ``sent``: the command was
    written before the connection failed (tmux may have run it)."""

    def __init__(self, message: str, *, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


@dataclass(frozen=True, slots=True)
class Reply:
    ok: bool
    lines: list[str]
    #: tmux's command number and time (seconds) from the reply's ``%begin``
    number: int = 0
    time: int = 0

    @property
    def text(self) -> str:
        """As a ``tmux`` process would have printed it: one ``\\n`` after each line."""
        return "".join(line + "\n" for line in self.lines)


def quote(arg: str) -> str:
    """``arg`` as one tmux command-language word: double-quoted, with ``\\``, ``"`` and ``$`` escaped and
    every control character written as an escape, so nothing in it is expanded, split or ends the line."""
    return '"' + arg.translate(_QUOTED) + '"'


#: what :func:`quote` writes for each character it does not keep as it is
_QUOTED = {**{c: f"\\{c:03o}" for c in [*range(0x20), 0x7F]}, ord("\n"): "\\n",
           **{ord(c): "\\" + c for c in '\\"$'}}


@dataclass(eq=False)
class _Request:
    """The commands of one :meth:`ControlClient.run_all` call: their lines, the nonce after each printing
    one, where they start on the connection once written, and their replies or the error that ended them."""

    lines: list[str] = field(default_factory=list)
    nonces: list[str | None] = field(default_factory=list)
    seq: int = -1
    replies: list[Reply] | None = None
    error: ControlUnavailable | None = None


class _Desync(Exception):
    """The stream does not look like tmux's replies any more."""


class ControlClient:
    """The control-mode connection to the tmux server that ``base`` (``tmux [-f F] -L/-S X``) names."""

    def __init__(self, base: list[str]) -> None:
        self.base = list(base)
        self._proc: subprocess.Popen[bytes] | None = None
        self._token: object = None
        self._lock: anyio.Lock | None = None
        self._buf = b""
        self._written = 0  # command lines written on this connection
        self._replied = 0  # replies (flags-1 blocks) read on it
        self._replies: dict[int, Reply] = {}
        #: calls waiting for the next write, and those written whose replies are not read yet (in order)
        self._queue: list[_Request] = []
        self._inflight: list[_Request] = []
        self._retry_at = 0.0
        self._backoff = 0.5
        self._finalizer: weakref.finalize | None = None

    @property
    def connected(self) -> bool:
        return self._proc is not None

    # ---- the connection ---------------------------------------------------------------------------------

    def _connect(self) -> None:
        if time.monotonic() < self._retry_at:
            raise ControlUnavailable("control mode failed a moment ago")
        env = {k: v for k, v in os.environ.items() if k != "TMUX"}  # attach refuses to nest otherwise
        try:
            # -N: never start a server (attach-session would start one, find no session and exit, and a
            # command racing that short-lived server would see it without the pane: "can't find pane")
            proc = subprocess.Popen([*self.base, "-N", "-C", "attach-session", "-f", "ignore-size,no-output"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    env=env, start_new_session=True, preexec_fn=_dies_with(os.getpid()))
        except OSError as exc:
            self._failed()
            raise ControlUnavailable(str(exc)) from None
        assert proc.stdin is not None and proc.stdout is not None
        os.set_blocking(proc.stdin.fileno(), False)
        os.set_blocking(proc.stdout.fileno(), False)
        self._proc, self._buf, self._written, self._replied, self._replies = proc, b"", 0, 0, {}
        self._queue, self._inflight = [], []
        self._token, self._lock = anyio.lowlevel.current_token(), anyio.Lock()
        self._finalizer = weakref.finalize(self, _stop, proc)

    def _failed(self) -> None:
        self._retry_at = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, MAX_BACKOFF_S)

    def close(self) -> None:
        """End the connection (the next command connects again); the calls still waiting on it fail."""
        if self._finalizer is not None:
            self._finalizer()
        self._proc = self._finalizer = None
        self._lock = None
        for request in self._inflight:
            request.error = request.error or ControlUnavailable("the connection was closed", sent=True)
        for request in self._queue:
            request.error = request.error or ControlUnavailable("the connection was closed")
        self._queue, self._inflight = [], []

    def _lost(self, ever_replied: bool) -> None:
        self.close()
        if ever_replied:
            self._backoff = 0.5  # it worked: the next call may connect at once (a restarted server)
        else:
            self._failed()

    # ---- commands ---------------------------------------------------------------------------------------

    async def run(self, *args: str) -> Reply:
        """Run one tmux command; raises :class:`ControlUnavailable` when control mode cannot serve it."""
        return (await self.run_all(args))[0]

    async def run_all(self, *commands: tuple[str, ...]) -> list[Reply]:
        """Run several tmux commands in one write (one round trip, in order), each with its own reply: a
        failing one does not stop those after it. Calls made while another round trip is on its way, or
        by tasks woken together, share the next write (50 screen-read tiles looking at once: one write,
        not 50). Raises :class:`ControlUnavailable` like :meth:`run`."""
        if self._proc is not None and self._token != anyio.lowlevel.current_token():
            self.close()  # connected under another event loop: its lock and waits are not this loop's
        if self._proc is None:
            self._connect()
        lock = self._lock
        assert lock is not None
        request = _Request()
        for args in commands:
            nonce = secrets.token_hex(8) if args and args[0] in PRINTING else None
            request.lines.append(" ".join(quote(a) for a in args) + "\n")
            if nonce is not None:
                request.lines.append(f"display-message -p {nonce}\n")
            request.nonces.append(nonce)
        self._queue.append(request)
        try:
            async with lock:
                if request.replies is None and request.error is None:
                    await anyio.lowlevel.cancel_shielded_checkpoint()  # the tasks woken with this one queue
                    await self._round_trip(request)
        finally:
            if request.seq < 0 and request in self._queue:
                self._queue.remove(request)  # cancelled before it was written
        if request.error is not None:  # one error may end several calls: each raises its own
            raise ControlUnavailable(str(request.error), sent=request.error.sent) from None
        assert request.replies is not None
        return request.replies

    async def _round_trip(self, request: _Request) -> None:
        """Write every request queued (``request`` among them, unless a round trip cancelled on its way
        wrote it), then read replies in order until ``request``'s are in: those before it are served too."""
        if self._proc is None or (request not in self._queue and request not in self._inflight):
            request.error = ControlUnavailable("the connection was lost")  # before this call was written
            return
        ever, sent = self._replied > 0, False
        try:
            # not cancelled halfway: the replies read serve other callers too, and a block read in part
            # would leave the stream out of step (a stuck tmux still ends it: the timeout)
            with anyio.CancelScope(shield=True), anyio.fail_after(REPLY_TIMEOUT_S):
                if self._queue:
                    batch, self._queue = self._queue, []
                    for queued in batch:
                        queued.seq, self._written = self._written, self._written + len(queued.lines)
                    self._inflight += batch
                    sent = True
                    await self._write("".join(line for queued in batch for line in queued.lines)
                                      .encode("utf-8", "surrogateescape"))
                sent = True
                while request.replies is None:
                    first = self._inflight[0]
                    replies, seq = [], first.seq
                    for nonce in first.nonces:
                        replies.append(await self._reply(seq))
                        if nonce is not None and (await self._reply(seq + 1)).lines != [nonce]:
                            raise _Desync("the nonce after the reply is missing")
                        seq += 2 if nonce is not None else 1
                    first.replies = replies
                    self._inflight.pop(0)
        except (OSError, EOFError, _Desync, TimeoutError) as exc:
            failed = ControlUnavailable(f"{type(exc).__name__}: {exc}", sent=sent)
            for written in self._inflight:
                written.error = failed
            request.error = failed
            self._lost(ever)  # the calls queued after this write fail as the connection closes

    async def _write(self, data: bytes) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        fd = self._proc.stdin.fileno()
        while data:
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                await anyio.wait_writable(fd)

    async def _reply(self, seq: int) -> Reply:
        """Read until the reply to the ``seq``-th command written is in; earlier ones nobody waits for are
        dropped."""
        while seq not in self._replies:
            await self._read_block()
        reply = self._replies.pop(seq)
        for old in [k for k in self._replies if k < seq]:
            del self._replies[old]
        return reply

    async def _read_block(self) -> None:
        line = await self._line()
        if not line.startswith(b"%"):
            raise _Desync(f"text outside a reply: {line[:40]!r}")
        word, _, rest = line.partition(b" ")
        if word in (b"%end", b"%error"):
            raise _Desync("an end with no reply open")
        if word == b"%exit":
            raise EOFError("tmux ended the control client")
        if word != b"%begin":
            return  # a notification (%session-changed, %window-add, ...): nothing waits for those
        guard, flags = rest, rest.rsplit(b" ", 1)[-1]
        lines: list[str] = []
        while True:
            line = await self._line()
            word, _, rest = line.partition(b" ")
            if word in (b"%end", b"%error") and rest == guard:
                break
            if flags != b"1" and word in (b"%begin", b"%end", b"%error"):
                raise _Desync("a reply inside a block that is not ours")
            lines.append(line.decode("utf-8", "replace"))
        if flags == b"1":
            stamp, number, _ = guard.split(b" ", 2)
            self._replies[self._replied] = Reply(ok=word == b"%end", lines=lines, number=int(number),
                                                 time=int(stamp))
            self._replied += 1

    async def _line(self) -> bytes:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while (end := self._buf.find(b"\n")) < 0:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                await anyio.wait_readable(fd)
                continue
            if not data:
                raise EOFError("the tmux server is gone")
            self._buf += data
        line, self._buf = self._buf[:end], self._buf[end + 1:]
        return line


PR_SET_PDEATHSIG = 1


def _dies_with(parent: int) -> Callable[[], None] | None:
    """For ``preexec_fn`` (Linux): the child gets SIGKILL when the thread that forked it ends, and ends at
    once if ``parent`` is already gone (it died before the ``prctl`` took effect). Elsewhere: None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Close the client's stdin (it detaches and exits) and reap it; kill it if it lingers. Its stdout
    stays open until then: tmux may still be writing to it, and a write that fails keeps it waiting."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=0.5)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
    try:
        if proc.stdout is not None:
            proc.stdout.close()
    except OSError:
        pass
