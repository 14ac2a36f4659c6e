"""The places a notice goes to: the tmux clients, the desktop, a webhook; and the notice itself
(:class:`Notice`), which the :class:`~pipeline.engine.notify.Notifier` posts and each place sends.

Each place sends on its own, at most :data:`PARALLEL` notices at a time, with its backlog capped (a place
that cannot keep up loses notices, the pipeline never waits). A webhook whose POST fails in a way that may
pass (no connection, no answer, HTTP 5xx, 408 or 429) is tried again for ``retry_s`` (30 s), the waits
doubling from :data:`FIRST_RETRY_S`; the tries of one notice are one notice (the same body), and a slot is
held only while a POST is under way, never during a wait. A place that finally fails says so once in the
log and again only after it worked in between. A webhook's URL is a secret: it goes to the log redactor
before the first send, and errors are described by their kind, never by their text (an HTTP library's
message may quote the URL).
"""

from __future__ import annotations

import http.client
import json
import logging
import shutil
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.abc import TaskGroup

from pipeline.engine.notify_config import NotifyEvent, NotifyTarget
from pipeline.system.logs import add_secret
from pipeline.system.text import sanitize
from pipeline.system.tmux import Tmux

__all__ = ["Notice", "Sink", "make_sink"]

log = logging.getLogger("batonpass")

PARALLEL = 2
BACKLOG = 16
#: the wait before a failed notice is tried again the first time; each further wait is twice the last
FIRST_RETRY_S = 1.0
#: longest text put on a status line or a desktop bubble
SHORT = 200


def one_line(text: str, limit: int = SHORT) -> str:
    """Printable, one line, at most ``limit`` characters (agents' files and names are not trusted)."""
    flat = " ".join(sanitize(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Notice:
    """One thing a person should know, in a line."""

    event: NotifyEvent
    tile: str
    title: str
    message: str
    route: str | None = None
    #: the hand-off (``route@turn``) it is about, if any
    handoff: str | None = None
    at: float = field(default_factory=time.time)

    def as_json(self) -> dict[str, Any]:
        """The webhook's body: stable field names."""
        return {"source": "batonpass", "event": self.event, "tile": self.tile, "title": self.title,
                "message": self.message, "route": self.route, "handoff": self.handoff,
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.at))}


class _GaveUp(Exception):
    """A notice tried more than once, and given up."""

    def __init__(self, cause: Exception, tries: int, spent: float) -> None:
        super().__init__(type(cause).__name__)  # never the cause's text: it may quote a webhook's url
        self.cause, self.tries, self.spent = cause, tries, spent


class Sink:
    """One place from ``settings.notify``."""

    #: for how long a notice that failed in a way that may pass is tried again (0: never)
    retry_s = 0.0

    def __init__(self, target: NotifyTarget) -> None:
        self.target = target
        self._slots = anyio.Semaphore(PARALLEL)
        self._pending = 0
        self._failing = False
        self._ready = anyio.Event()

    async def prepare(self) -> None:
        """:meth:`start`, then let the notices waiting for it go."""
        try:
            await self.start()
        finally:
            self._ready.set()

    async def start(self) -> None:
        """Once, before the first notice."""

    async def send(self, notice: Notice) -> None:
        raise NotImplementedError

    def retryable(self, exc: Exception) -> bool:
        """Whether trying ``exc``'s notice again may help."""
        return False

    def enqueue(self, tg: TaskGroup, notice: Notice) -> None:
        if self._pending >= BACKLOG:
            self._failed("too many notices waiting to be sent; dropping this one")
            return
        self._pending += 1
        tg.start_soon(self._deliver, notice)

    async def _deliver(self, notice: Notice) -> None:
        failures: list[str] = []
        try:
            await self._ready.wait()
            tries = await self._send_until_given_up(notice, failures)
        except anyio.get_cancelled_exc_class():
            if failures:  # batonpass is stopping while it waits to try again: say what is lost
                log.warning("notice to %s not sent (%s about %s): batonpass stopped while it was being "
                            "tried again (%s)", self.target.label(), notice.event, notice.tile, failures[-1])
            raise
        except _GaveUp as gave_up:
            self._failed(f"{self.describe(gave_up.cause)} ({gave_up.tries} tries over {gave_up.spent:.0f}s)")
        except Exception as exc:  # a place that fails never stops the others, nor the pipeline
            self._failed(self.describe(exc))
        else:
            if self._failing:
                log.info("notices to %s get through again", self.target.label())
            elif tries > 1:
                log.info("notice      %s to %s got through at try %d", notice.event, self.target.label(),
                         tries)
            self._failing = False
        finally:
            self._pending -= 1

    async def _send_until_given_up(self, notice: Notice, failures: list[str]) -> int:
        """Send ``notice``, trying again while that may help and ``retry_s`` lasts; returns the tries.
        Each failed try's description is added to ``failures``."""
        started, wait, tries = anyio.current_time(), FIRST_RETRY_S, 1
        while True:
            try:
                async with self._slots:
                    await self.send(notice)
                return tries
            except Exception as exc:
                spent = anyio.current_time() - started
                left = self.retry_s - spent
                if not self.retryable(exc) or left <= 0:
                    if tries > 1:
                        raise _GaveUp(exc, tries, spent) from None
                    raise
                failures.append(self.describe(exc))
                wait, pause = wait * 2, min(wait, left)
                log.debug("notice      %s to %s: try %d failed (%s); trying again in %.1fs", notice.event,
                          self.target.label(), tries, self.describe(exc), pause)
            await anyio.sleep(pause)
            tries += 1

    def _failed(self, why: str) -> None:
        if not self._failing:
            log.warning("notice to %s failed: %s; further failures are not logged until one gets through",
                        self.target.label(), why)
        self._failing = True

    def describe(self, exc: Exception) -> str:
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class TmuxSink(Sink):
    """``display-message`` on the status line of every client attached to the tiles' tmux server."""

    def __init__(self, target: NotifyTarget, tmux: Tmux | None) -> None:
        super().__init__(target)
        self.tmux = tmux

    async def send(self, notice: Notice) -> None:
        if self.tmux is None:
            return
        told = await self.tmux.tell_clients(one_line(f"batonpass: {notice.message}"),
                                            seconds=self.target.display_s)
        if not told:
            log.debug("notice %s: no tmux client is attached to %s", notice.event, self.tmux.describe())


class DesktopSink(Sink):
    """``notify-send`` where it is installed; where it is not, one log line and nothing else."""

    def __init__(self, target: NotifyTarget) -> None:
        super().__init__(target)
        self.program: str | None = None

    async def start(self) -> None:
        self.program = shutil.which("notify-send")
        if self.program is None:
            log.info("desktop notices: notify-send is not installed; they are skipped")

    async def send(self, notice: Notice) -> None:
        if self.program is None:
            return
        urgency = "normal" if notice.event == "max_hops" else "critical"
        with anyio.fail_after(self.target.timeout_s):
            result = await anyio.run_process(
                [self.program, "--app-name=batonpass", f"--urgency={urgency}", "--",
                 one_line(f"batonpass: {notice.title}", 80), one_line(notice.message)], check=False)
        if result.returncode != 0:
            raise RuntimeError(f"notify-send exited with status {result.returncode}: "
                               f"{one_line(result.stderr.decode('utf-8', 'replace'), 120)}")

    def describe(self, exc: Exception) -> str:
        if isinstance(exc, TimeoutError):
            return f"notify-send did not finish within {self.target.timeout_s:g}s (timeout_s)"
        if isinstance(exc, RuntimeError):
            return str(exc)
        return super().describe(exc)


class WebhookSink(Sink):
    """A JSON POST per notice, from a daemon thread of its own: a server that never answers holds neither
    the shared thread pool (adapters read files with it) nor the exit of ``baton run``."""

    def __init__(self, target: NotifyTarget) -> None:
        super().__init__(target)
        self.retry_s = target.retry_s

    async def start(self) -> None:
        assert self.target.url is not None
        add_secret(self.target.url.get_secret_value())

    def retryable(self, exc: Exception) -> bool:
        if isinstance(exc, urllib.error.HTTPError):  # a server error, or "too many requests", may pass
            return exc.code >= 500 or exc.code in (408, 425, 429)
        if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, ssl.SSLCertVerificationError):
            return False  # a certificate that is not trusted now will not be in a minute
        if isinstance(exc, http.client.InvalidURL):
            return False
        return isinstance(exc, OSError | http.client.HTTPException)  # refused, reset, no answer, a bad reply

    async def send(self, notice: Notice) -> None:
        body = json.dumps(notice.as_json(), ensure_ascii=False).encode("utf-8")
        token = anyio.lowlevel.current_token()
        done = anyio.Event()
        failure: list[Exception] = []

        def post() -> None:
            try:
                self._post(body)
            except Exception as exc:
                failure.append(exc)
            try:
                anyio.from_thread.run_sync(done.set, token=token)
            except RuntimeError:
                pass  # the event loop is gone: nobody waits for this answer any more

        threading.Thread(target=post, name="batonpass-webhook", daemon=True).start()
        await done.wait()
        if failure:
            raise failure[0]

    def _post(self, body: bytes) -> None:
        assert self.target.url is not None
        request = urllib.request.Request(
            self.target.url.get_secret_value(), data=body, method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "batonpass"},
        )
        with urllib.request.urlopen(request, timeout=self.target.timeout_s) as answer:
            answer.read(4096)

    def describe(self, exc: Exception) -> str:
        # by kind only: urllib's and the server's texts may quote the URL (and its token)
        if isinstance(exc, urllib.error.HTTPError):
            return f"the server answered HTTP {exc.code}"
        if isinstance(exc, TimeoutError | socket.timeout):
            return f"no answer within {self.target.timeout_s:g}s"
        if isinstance(exc, urllib.error.URLError):
            reason = exc.reason
            if isinstance(reason, OSError) and reason.strerror:
                return f"cannot connect ({reason.strerror})"
            return "cannot connect" if not isinstance(reason, TimeoutError) else (
                f"no answer within {self.target.timeout_s:g}s")
        return type(exc).__name__


def make_sink(target: NotifyTarget, tmux: Tmux | None) -> Sink:
    if target.kind == "tmux":
        return TmuxSink(target, tmux)
    if target.kind == "desktop":
        return DesktopSink(target)
    return WebhookSink(target)

