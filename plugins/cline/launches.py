"""Which Cline process started which session, from Cline's own log (docs/agents.md, Cline).

A TUI started while a hub daemon runs has its sessions run by the hub: their records name the hub's pid,
not the TUI's, so two TUIs in one folder cannot be told apart by the records. Cline 3.0.65 logs, in
``<data folder>/logs/cline.log`` (``$CLINE_LOG_PATH`` moves it; ``CLINE_LOG_ENABLED=0`` turns it off), one
JSON line per event, each with the ``pid`` of the process that wrote it; the TUI writes a telemetry line
``"event": "session.started"`` with the ``sessionId`` when it starts a session (at its start and at each new
task), whichever process then runs it. The log is only ever appended to: it is read on from where the last
look stopped. Blocking file work: callers run it in a worker thread.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pipeline.plugin.tools import iso_time

__all__ = ["LaunchLog", "log_path"]

_STARTED = b'"session.started"'


def log_path(data_dir: Path, env: dict[str, str]) -> Path:
    """Where a Cline with this data folder and environment logs."""
    value = env.get("CLINE_LOG_PATH", "").strip()
    return Path(value).expanduser() if value else data_dir / "logs" / "cline.log"


class LaunchLog:
    """The sessions each process started, as one Cline log tells them, read on as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._identity: tuple[int, int] | None = None
        #: pid → ``(when, session id)`` of each session it started, oldest first
        self._started: dict[int, list[tuple[float, str]]] = {}

    def sessions_of(self, pid: int, since: float) -> list[str] | None:
        """The ids of the sessions process ``pid`` started at or after ``since`` (epoch seconds: its start,
        so a reused pid's older lines do not count), oldest first; None when the log cannot be read."""
        if not self._read():
            return None
        return [sid for at, sid in self._started.get(pid, []) if at >= since]

    def started_by_others(self, pid: int) -> set[str]:
        """The ids of the sessions the log says another process than ``pid`` started."""
        return {sid for other, found in self._started.items() if other != pid for _, sid in found}

    def _read(self) -> bool:
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                if (st.st_dev, st.st_ino) != self._identity or st.st_size < self._offset:  # a new log
                    self._identity, self._offset, self._started = (st.st_dev, st.st_ino), 0, {}
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return False
        end = data.rfind(b"\n") + 1  # a line being written is read at the next look
        self._offset += end
        for line in data[:end].splitlines():
            if _STARTED in line:
                self._take(line)
        return True

    def _take(self, line: bytes) -> None:
        try:
            entry = json.loads(line)
        except ValueError:
            return
        if not isinstance(entry, dict):
            return
        props = entry.get("properties")
        sid = props.get("sessionId") if isinstance(props, dict) else None
        pid, at = entry.get("pid"), iso_time(entry.get("time"))
        if entry.get("event") == "session.started" and isinstance(sid, str) and isinstance(pid, int) \
                and at is not None:
            self._started.setdefault(pid, []).append((at, sid))
