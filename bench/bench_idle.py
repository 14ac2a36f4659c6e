"""Idle cost of ``baton run``: 50 Claude Code tiles (the stand-in of ``bench/claude_standin.py``), 25 routes,
nothing happening, for ``BENCH_IDLE_S`` (60) seconds. ``BENCH_AGENT=codex``: 50 Codex tiles instead (the
stand-in of ``bench/codex_standin.py``, one CODEX_HOME, each following its rollout); with ``BENCH_FRESH=1``
Codex tiles that have had no prompt yet (no rollout: a new TUI's thread). ``BENCH_AGENT=terminal``: 50
screen-read tiles (``agent: terminal``) whose panes run ``cat``; ``BENCH_AGENT=shell``: 50 ``shell`` tiles
(bash at its prompt); ``BENCH_AGENT=opencode``: 50 OpenCode tiles (the tests' stand-in, one store).

Measured from /proc: the CPU time (user + system) of the ``baton run`` process and of its children (the
tmux control-mode client) over the window, as a percentage of one core, and the daemon's RSS at the end;
also the tmux server's own CPU over the window (its work for the daemon's commands and its panes' output).
The baseline, run the same way in the same process: tmux as one process per command and the watchfiles
watcher (``BATON_TMUX_CONTROL=0 BATON_WATCHER=watchfiles``).

Run: ``.venv/bin/python bench/bench_idle.py`` (needs tmux; its own socket and temp dirs; ~2.5 min).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AGENT = os.environ.get("BENCH_AGENT", "claude")
STANDIN, HOME_VARIABLE = {"claude": (ROOT / "bench" / "claude_standin.py", "CLAUDE_CONFIG_DIR"),
                          "codex": (ROOT / "bench" / "codex_standin.py", "CODEX_HOME"),
                          "terminal": (None, ""), "shell": (None, ""), "opencode": (None, "")}[AGENT]
#: what a pane runs when no agent stand-in of bench/ does (``opencode``: the tests' stand-in, named opencode)
PANE_COMMAND = {"shell": "env PS1='$ ' bash --norc --noprofile",
                "opencode": shlex.join([sys.executable, "-m", "tests.fakes.standin_tui", "--comm", "opencode",
                                        "--prompt", "┃  ", "--busy", "esc interrupt"])}.get(AGENT, "cat")
FRESH = ["CODEX_STANDIN_FRESH=1"] if os.environ.get("BENCH_FRESH") else []
TILES = int(os.environ.get("BENCH_TILES", "50"))
WINDOW_S = float(os.environ.get("BENCH_IDLE_S", "60"))
MODES = {"control + inotify": {}, "subprocess + watchfiles": {"BATON_TMUX_CONTROL": "0",
                                                                 "BATON_WATCHER": "watchfiles"}}


def ticks(pid: int) -> int:
    """CPU ticks of ``pid`` (with its children that ended: ``tmux`` processes) and of its live descendants
    (the tmux control-mode client). The tmux server's own work for these commands is not counted."""
    total = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
            if p == pid:
                total += int(fields[13]) + int(fields[14])  # cutime, cstime: children waited for
            for task in os.listdir(f"/proc/{p}/task"):
                todo.extend(int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split())
        except (OSError, IndexError):
            continue
    return total


def own_ticks(pid: int) -> int:
    """CPU ticks of ``pid`` alone (the tmux server: its panes' programs are its children)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def opencode_sessions(db: Path, folders: list[Path]) -> None:
    """An OpenCode store with a session and one finished turn per project folder, made after the stand-ins
    started, as OpenCode makes them."""
    sys.path.insert(0, str(ROOT))
    from tests.fakes.opencode_store import StoreWriter

    time.sleep(1.5)
    writer = StoreWriter(db)
    for folder in folders:
        writer.turn(writer.session(folder), "a prompt", "an answer", cwd=str(folder))
    writer.close()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def measure(mode: str, extra_env: dict[str, str], tmp: Path) -> tuple[float, float, float]:
    work = tmp / mode.replace(" ", "")
    config = work / AGENT
    config.mkdir(parents=True)
    socket = f"baton-idle-{os.getpid()}-{len(os.listdir(tmp))}"
    tmux = ["tmux", "-f", "/dev/null", "-L", socket]
    lines = ["version: 1", "tiles:"]
    try:
        for i in range(TILES):
            cwd = work / (f"oc{i}" if AGENT == "opencode" else f"proj{i // 2}")  # OpenCode: a folder each
            cwd.mkdir(exist_ok=True)
            cmd = PANE_COMMAND if STANDIN is None else shlex.join(
                ["env", f"{HOME_VARIABLE}={config}", *FRESH, sys.executable, str(STANDIN), "--name", f"c{i}",
                 "--log", str(work / f"c{i}.jsonl")])
            if AGENT == "opencode":  # one store for all, as OpenCode keeps it (XDG_DATA_HOME/opencode)
                cmd = shlex.join(["env", f"XDG_DATA_HOME={config}", f"PYTHONPATH={ROOT}"]) + " " + cmd
            pane = subprocess.run([*tmux, "new-session", "-d", "-P", "-F", "#{pane_id}", "-s", f"c{i}", "-x",
                                   "100", "-y", "30", "-c", str(cwd), cmd],
                                  capture_output=True, text=True, check=True).stdout.strip()
            lines.append(f"  c{i}: {{pane: '{pane}', agent: {AGENT}}}")
        lines.append("routes:")
        lines += [f"  - {{from: c{i}, to: c{i + 1}}}" for i in range(0, TILES, 2)]
        if AGENT == "opencode":
            opencode_sessions(config / "opencode" / "opencode.db", [work / f"oc{i}" for i in range(TILES)])
        routes = work / "routes.yaml"
        routes.write_text("\n".join(lines) + "\n")
        env = {**os.environ, "XDG_STATE_HOME": str(work / "state"), **extra_env}
        baton = str(Path(sys.executable).parent / "baton")
        daemon = subprocess.Popen([baton, "run", "-L", socket, "-c", str(routes)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(8.0)  # started, every tile resolved and followed
            server = int(subprocess.run([*tmux, "display-message", "-p", "#{pid}"], capture_output=True,
                                        text=True, check=True).stdout)
            start, server_start, t0 = ticks(daemon.pid), own_ticks(server), time.monotonic()
            time.sleep(WINDOW_S)
            elapsed, hz = time.monotonic() - t0, os.sysconf("SC_CLK_TCK")
            cpu = (ticks(daemon.pid) - start) / hz / elapsed * 100
            server_cpu = (own_ticks(server) - server_start) / hz / elapsed * 100
            rss = rss_mb(daemon.pid)
        finally:
            daemon.terminate()
            try:
                daemon.wait(20)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        return cpu, rss, server_cpu
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def main() -> None:
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode, env in MODES.items():
            cpu, rss, server_cpu = measure(mode, env, Path(tmp))
            results[mode] = cpu, rss
            print(f"{mode:>24}: {TILES} {AGENT} tiles idle {WINDOW_S:.0f} s: CPU {cpu:.2f} % of a core, "
                  f"RSS {rss:.0f} MB (the tmux server meanwhile: {server_cpu:.2f} %)", flush=True)
    (c_cpu, c_rss), (s_cpu, s_rss) = results.values()
    print(f"control + inotify / baseline: CPU x{c_cpu / s_cpu if s_cpu else float('nan'):.2f}, "
          f"RSS x{c_rss / s_rss:.2f}")


if __name__ == "__main__":
    main()
