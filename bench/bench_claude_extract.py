"""Benchmarks of the Claude Code adapter, each against a baseline measured in the same run.

1. Extraction of the last answer from a 100 MB transcript vs. from a 100 KB one (same last turn): the
   reader reads from the end, so the ratio should stay near 1.
2. One resolution pane → transcript (process walk, session file, folder encoding, /clear check) vs. one
   read of /proc/PID/stat.
3. From the end-of-turn lines on disk to the Completion emitted by the adapter (real shared watcher,
   real tmux pane with a process named claude) vs. the watcher's own write → hint latency.

Run: ``.venv/bin/python bench/bench_claude_extract.py`` (needs tmux; uses only temp dirs and its own
tmux socket, and kills only what it started).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.engine.config import Tile  # noqa: E402
from pipeline.engine.context import EngineContext  # noqa: E402
from pipeline.engine.watch import FileWatcher  # noqa: E402
from pipeline.system import proc  # noqa: E402
from pipeline.system.tmux import Tmux  # noqa: E402
from plugins.claude_code.adapter import ClaudeCodeAdapter  # noqa: E402
from plugins.claude_code.reader import last_finished_turn  # noqa: E402
from plugins.claude_code.resolve import project_folder_name, resolve_pid  # noqa: E402


def line(session: str, parent: str | None, **obj: object) -> tuple[bytes, str]:
    uid = str(uuid.uuid4())
    data = {"parentUuid": parent, "isSidechain": False, "uuid": uid, "sessionId": session,
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()), **obj}
    return json.dumps(data).encode() + b"\n", uid


def turn(session: str, parent: str | None, prompt: str, answer: str) -> tuple[bytes, str]:
    out = b""
    chunk, parent = line(session, parent, type="user", promptId=str(uuid.uuid4()),
                         message={"role": "user", "content": prompt})
    out += chunk
    chunk, parent = line(session, parent, type="assistant", message={
        "id": f"msg_{uuid.uuid4().hex[:12]}", "role": "assistant", "stop_reason": "end_turn",
        "content": [{"type": "text", "text": answer}]})
    out += chunk
    chunk, parent = line(session, parent, type="system", subtype="turn_duration", durationMs=1000)
    return out + chunk, parent


def make_transcript(path: Path, size: int) -> str:
    session = path.stem
    block, parent = b"", None
    for i in range(10):
        chunk, parent = turn(session, parent, f"prompt {i}", f"answer {i} " + "lorem ipsum dolor " * 150)
        block += chunk
    with path.open("wb") as f:
        while f.tell() < size - len(block):
            f.write(block)
        last, _ = turn(session, parent, "the last prompt", "the last answer ✓")
        f.write(last)
    return "the last answer ✓"


def timed(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def bench_extract(tmp: Path) -> None:
    small, big = tmp / f"{uuid.uuid4()}.jsonl", tmp / f"{uuid.uuid4()}.jsonl"
    make_transcript(small, 1024 * 1024)
    t0 = time.perf_counter()
    expected = make_transcript(big, 100 * 1024 * 1024)
    made = time.perf_counter() - t0
    assert last_finished_turn(small).text == expected == last_finished_turn(big).text
    base = timed(lambda: last_finished_turn(small), 50)
    large = timed(lambda: last_finished_turn(big), 50)
    print(f"extract last answer: {small.stat().st_size / 2**20:.0f} MB {base * 1e3:.2f} ms | "
          f"{big.stat().st_size / 2**20:.0f} MB {large * 1e3:.2f} ms | ratio {large / base:.2f} "
          f"(100 MB file written in {made:.2f} s)")


def fake_claude(tmp: Path) -> tuple[subprocess.Popen[bytes], int, Path, Path]:
    bin_dir, config, cwd = tmp / "bin", tmp / "config", tmp / "proj"
    for d in (bin_dir, cwd):
        d.mkdir(exist_ok=True)
    shutil.copy(shutil.which("sleep"), bin_dir / "claude")
    shell = subprocess.Popen(["bash", "-c", "claude 300 & wait"], cwd=cwd, stderr=subprocess.DEVNULL,
                             env={"PATH": f"{bin_dir}:/usr/bin:/bin", "CLAUDE_CONFIG_DIR": str(config)})
    while proc.find_agent(shell.pid, {"claude"}) is None:
        time.sleep(0.01)
    return shell, proc.find_agent(shell.pid, {"claude"}).pid, config, cwd


def write_session(config: Path, pid: int, cwd: Path, session: str, status: str) -> None:
    path = config / "sessions" / f"{pid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": pid, "sessionId": session, "cwd": str(cwd), "status": status,
                               "procStart": str(proc.read_proc(pid).start_ticks),
                               "startedAt": int(time.time() * 1000)}))
    tmp.replace(path)


def bench_resolve(tmp: Path) -> None:
    shell, pid, config, cwd = fake_claude(tmp)
    try:
        session = str(uuid.uuid4())
        write_session(config, pid, cwd, session, "idle")
        folder = config / "projects" / project_folder_name(str(cwd))
        folder.mkdir(parents=True)
        for _ in range(50):  # other sessions' transcripts in the same folder
            (folder / f"{uuid.uuid4()}.jsonl").write_text("{}\n")
        make_transcript(folder / f"{session}.jsonl", 1024 * 1024)
        assert resolve_pid(shell.pid).transcript == folder / f"{session}.jsonl"
        base = timed(lambda: proc.read_proc(pid), 200)
        one = timed(lambda: resolve_pid(shell.pid), 200)
        print(
            f"resolve pane pid -> transcript: {one * 1e3:.3f} ms | one /proc/PID/stat read {base * 1e6:.1f} "
            f"µs | ratio {one / base:.0f}"
        )
    finally:
        os.kill(pid, 9)
        shell.kill()
        shell.wait()


async def bench_latency(tmp: Path) -> None:
    tmux = Tmux(socket_name=f"baton-bench-{os.getpid()}", config_file="/dev/null")
    bin_dir, config, cwd = tmp / "bin", tmp / "config", tmp / "proj"
    bin_dir.mkdir(exist_ok=True)
    cwd.mkdir(exist_ok=True)
    shutil.copy(shutil.which("sleep"), bin_dir / "claude")
    pane = await tmux.new_session(
        "bench",
        f"exec env PATH={bin_dir}:/usr/bin:/bin CLAUDE_CONFIG_DIR={config} "
        "bash --norc --noprofile -c 'claude 300 & wait'",
        cwd=str(cwd),
    )
    try:
        while proc.find_agent(pane.pid, {"claude"}) is None:
            await anyio.sleep(0.01)
        pid = proc.find_agent(pane.pid, {"claude"}).pid
        session = str(uuid.uuid4())
        write_session(config, pid, cwd, session, "idle")
        folder = config / "projects" / project_folder_name(str(cwd))
        folder.mkdir(parents=True)
        path = folder / f"{session}.jsonl"
        make_transcript(path, 64 * 1024)
        watcher = FileWatcher()
        ctx = EngineContext(
            name="bench", tile=Tile(pane=pane.pane_id, agent="claude"), tmux=tmux, watcher=watcher
        )
        adapter = ClaudeCodeAdapter(ctx)
        emitted: list[float] = []

        async def emit(completion) -> None:
            emitted.append(time.perf_counter())

        hint_lat, done_lat = [], []
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher.run)
            tg.start_soon(adapter.follow, emit)
            probe = watcher.subscribe(tmp / "probe")
            await anyio.sleep(1.5)
            for i in range(10):
                # baseline: a write to a watched folder until its hint
                t0 = time.perf_counter()
                (tmp / "probe").write_text(str(i))
                await probe.wait(5)
                hint_lat.append(time.perf_counter() - t0)
                await anyio.sleep(0.3)
                # a turn written like Claude Code: its prompt line, later its end lines in one write
                prompt, parent = line(session, None, type="user", promptId=str(uuid.uuid4()),
                                      message={"role": "user", "content": f"bench {i}"})
                with path.open("ab") as f:
                    f.write(prompt)
                await anyio.sleep(0.3)
                answer, parent = line(session, parent, type="assistant", message={
                    "id": f"msg_{i}", "role": "assistant", "stop_reason": "end_turn",
                    "content": [{"type": "text", "text": f"answer {i}"}]})
                duration, _ = line(session, parent, type="system", subtype="turn_duration")
                before = len(emitted)
                t0 = time.perf_counter()
                with path.open("ab") as f:
                    f.write(answer + duration)
                with anyio.fail_after(10):
                    while len(emitted) == before:
                        await anyio.sleep(0.001)
                done_lat.append(emitted[-1] - t0)
                await anyio.sleep(0.3)
            tg.cancel_scope.cancel()
        hint, done = statistics.median(hint_lat), statistics.median(done_lat)
        print(
            f"end_turn line on disk -> Completion emitted: median {done * 1e3:.1f} ms (max "
            f"{max(done_lat) * 1e3:.1f}) | "
            f"watcher write -> hint {hint * 1e3:.1f} ms | ratio {done / hint:.2f}"
        )
    finally:
        await tmux.kill_server()


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="baton-bench-") as tmp:
        root = Path(tmp)
        for name in ("extract", "resolve", "latency"):
            (root / name).mkdir()
        bench_extract(root / "extract")
        bench_resolve(root / "resolve")
        if shutil.which("tmux"):
            anyio.run(bench_latency, root / "latency")
        else:
            print("latency: skipped (no tmux)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
