"""``baton web`` with 50 Claude Code tiles (the stand-in of ``bench/claude_standin.py``): how soon a state
change reaches a page, and what open pages cost the idle server.

- Latency: the bench rewrites one tile's session file (``waiting`` on a permission prompt, then ``idle``
  again), as Claude Code does, ``BENCH_CHANGES`` (40) times on tiles picked at random, and takes the time
  from that write (``time.time()`` just before ``os.replace``) to the moment an event-stream client (a plain
  HTTP client reading ``/api/events``) holds the frame that shows it. The baseline, in the same process: the
  same with one tile (what 49 more tiles cost).
- Idle: the server's CPU time (its process and its children, psutil) over ``BENCH_IDLE_S`` (30) seconds
  with no page open, then with 10 event streams open, as a percentage of one core, alternated twice; the
  difference is what 10 pages add. The tmux server's CPU over the windows with no page is printed too:
  what the board asks of tmux is the board's cost as well.

Run: ``.venv/bin/python bench/bench_web.py`` (needs tmux; its own socket and temp dirs; ~4 min).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "bench" / "claude_standin.py"
TILES = int(os.environ.get("BENCH_TILES", "50"))
CHANGES = int(os.environ.get("BENCH_CHANGES", "40"))
IDLE_S = float(os.environ.get("BENCH_IDLE_S", "30"))
PAGES = 10


class Stream:
    """An event-stream client in a thread: each frame with the time it was read."""

    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.conn.request("GET", f"/api/events?token={token}")
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.status
        self.frames: list[tuple[float, dict]] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for raw in self.resp:
                if raw.startswith(b"data: "):
                    at = time.time()
                    with self.cond:
                        self.frames.append((at, json.loads(raw[6:])))
                        self.cond.notify_all()
        except (OSError, ValueError, AttributeError, http.client.HTTPException):  # closed
            return

    def wait(self, tile: str, kind: str, after: int, timeout: float = 30.0) -> tuple[float, int]:
        """When the first frame from index ``after`` on shows ``tile`` as ``kind``; and the next index."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for i in range(after, len(self.frames)):
                    at, frame = self.frames[i]
                    if any(t["tile"] == tile and t["kind"] == kind for t in frame["tiles"]):
                        return at, i + 1
                after = len(self.frames)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{tile} never showed {kind}")
                self.cond.wait(left)

    def close(self) -> None:
        self.conn.close()


def set_status(path: Path, status: str) -> float:
    """Rewrite a stand-in's session file as Claude Code does; the time of the write."""
    data = json.loads(path.read_text())
    data.update(status=status, statusUpdatedAt=time.time_ns() // 1_000_000)
    data.pop("waitingFor", None)
    if status == "waiting":
        data["waitingFor"] = "permission prompt"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    at = time.time()
    os.replace(tmp, path)
    return at


def cpu_s(proc: psutil.Process) -> float:
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            continue
    return total


def own_cpu_s(proc: psutil.Process | None) -> float:
    """A process's own CPU time, without its children's (the tmux server's children are the panes)."""
    if proc is None:
        return 0.0
    t = proc.cpu_times()
    return t.user + t.system


def window(proc: psutil.Process, tmux: psutil.Process | None = None) -> float:
    """The server's CPU over one window, as a percentage of one core (``tmux``: the tmux server's too,
    printed)."""
    t0, c0, s0 = time.monotonic(), cpu_s(proc), own_cpu_s(tmux)
    time.sleep(IDLE_S)  # shapes the scenario: the window measured
    elapsed = time.monotonic() - t0
    if tmux:
        print(f"  the tmux server meanwhile: {(own_cpu_s(tmux) - s0) / elapsed * 100:.2f} %", flush=True)
    return (cpu_s(proc) - c0) / elapsed * 100


def idle_cost(proc: psutil.Process, port: int, token: str, tmux: psutil.Process) -> tuple[float, float]:
    """(CPU % with no page, with 10 pages): windows alternated (none, pages, none, pages), each the mean
    of its two; the frames the pages got meanwhile printed (an idle board sends none)."""
    quiet, busy = [], []
    for _ in range(2):
        time.sleep(2)  # shapes the scenario: the last streams gone
        quiet.append(window(proc, tmux))
        pages = [Stream(port, token) for _ in range(PAGES)]
        time.sleep(2)  # shapes the scenario: every page has its first frame
        before = sum(len(page.frames) for page in pages)
        busy.append(window(proc))
        got = sum(len(page.frames) for page in pages) - before
        print(f"  windows of {IDLE_S:.0f} s: no page {quiet[-1]:.2f} %, {PAGES} pages {busy[-1]:.2f} % "
              f"({got} frames sent to them meanwhile)", flush=True)
        for page in pages:
            page.close()
    return statistics.mean(quiet), statistics.mean(busy)


def run(tiles: int, tmp: Path, idle: bool) -> tuple[list[float], float, float]:
    """(latencies in ms, idle CPU % with no page, idle CPU % with 10 pages) for ``tiles`` tiles."""
    work = tmp / f"t{tiles}"
    config = work / "claude"
    config.mkdir(parents=True)
    socket = f"baton-web-bench-{os.getpid()}-{tiles}"
    tmux = ["tmux", "-f", "/dev/null", "-L", socket]
    lines = ["version: 1", "tiles:"]
    server = None
    try:
        for i in range(tiles):
            cwd = work / f"proj{i}"
            cwd.mkdir()
            cmd = shlex.join(["env", f"CLAUDE_CONFIG_DIR={config}", sys.executable, str(STANDIN), "--name",
                              f"c{i}", "--log", str(work / f"c{i}.jsonl")])
            pane = subprocess.run([*tmux, "new-session", "-d", "-P", "-F", "#{pane_id}", "-s", f"c{i}", "-x",
                                   "100", "-y", "30", "-c", str(cwd), cmd],
                                  capture_output=True, text=True, check=True).stdout.strip()
            lines.append(f"  c{i}: {{pane: '{pane}', agent: claude}}")
        lines.append("routes:" if tiles > 1 else "routes: []")
        lines += [f"  - {{from: c{i}, to: c{i + 1}}}" for i in range(0, tiles - 1, 2)]
        (work / "routes.yaml").write_text("\n".join(lines) + "\n")
        env = {**os.environ, "XDG_STATE_HOME": str(work / "state"), "CLAUDE_CONFIG_DIR": str(config)}
        out, err = work / "web.out", work / "web.err"
        with out.open("w") as o, err.open("w") as e:
            server = subprocess.Popen([str(Path(sys.executable).parent / "baton"), "-L", socket, "-c",
                                       str(work / "routes.yaml"), "web", "--port", "0"], env=env, stdout=o,
                                      stderr=e)
        deadline = time.monotonic() + 60
        while not (found := re.search(r":(\d+)/\?token=(\S+)", out.read_text())):
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError(f"baton web did not start: {err.read_text()}")
            time.sleep(0.1)
        port, token = int(found.group(1)), found.group(2)
        sessions = sorted((config / "sessions").glob("*.json"))
        while len(sessions) < tiles:
            time.sleep(0.1)
            sessions = sorted((config / "sessions").glob("*.json"))
        stream = Stream(port, token)
        names = [f"c{i}" for i in range(tiles)]
        by_pid = {json.loads(p.read_text())["pid"]: p for p in sessions}
        stream.wait("c0", "idle", 0, 60)
        # which session file is which tile: the tile's pane's process
        files = {}
        for i, name in enumerate(names):
            pane_pid = int(subprocess.run([*tmux, "display-message", "-p", "-t", f"c{i}", "#{pane_pid}"],
                                          capture_output=True, text=True, check=True).stdout)
            kids = {p.pid for p in psutil.Process(pane_pid).children(recursive=True)} | {pane_pid}
            files[name] = next(path for pid, path in by_pid.items() if pid in kids)
        time.sleep(3)  # shapes the scenario: every tile looked at once, the tokens read
        latencies, seen = [], len(stream.frames)
        rng = random.Random(1)
        for _ in range(CHANGES):
            name = rng.choice(names)
            for status, kind in (("waiting", "waiting"), ("idle", "idle")):
                wrote = set_status(files[name], status)
                at, seen = stream.wait(name, kind, seen)
                latencies.append((at - wrote) * 1000)
                time.sleep(0.25)  # shapes the scenario: changes apart, as a person's would be
        stream.close()
        quiet = with_pages = float("nan")
        if idle:
            pid = subprocess.run([*tmux, "display-message", "-p", "#{pid}"], capture_output=True, text=True,
                                 check=True).stdout
            quiet, with_pages = idle_cost(psutil.Process(server.pid), port, token, psutil.Process(int(pid)))
        return latencies, quiet, with_pages
    finally:
        if server is not None:
            server.send_signal(2)
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def summary(ms: list[float]) -> str:
    q = statistics.quantiles(ms, n=20)
    return f"p50 {statistics.median(ms):.0f} ms, p95 {q[18]:.0f} ms, max {max(ms):.0f} ms ({len(ms)} changes)"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base, _, _ = run(1, Path(tmp), idle=False)
        print(f"{'1 tile (baseline)':>18}: a state change to the page's stream: {summary(base)}", flush=True)
        lat, quiet, pages = run(TILES, Path(tmp), idle=True)
        print(f"{f'{TILES} tiles':>18}: a state change to the page's stream: {summary(lat)}", flush=True)
        print(f"{TILES} tiles / baseline: p50 x{statistics.median(lat) / statistics.median(base):.2f}")
        print(f"idle server, {TILES} tiles, {IDLE_S:.0f} s: {quiet:.2f} % of a core with no page, "
              f"{pages:.2f} % with {PAGES} pages open: the pages add {pages - quiet:+.2f} % "
              f"(x{pages / quiet:.2f})")


if __name__ == "__main__":
    main()
