"""Two steps of a hand-off, each against its naive way, in the same process run.

1. Finding the agent's process under a pane: a ``ps -e`` walk (one ``ps`` process, its table parsed, the
   pane's subtree searched) vs :func:`pipeline.system.proc.find_agent` (the pane's own subtree read from
   /proc). A real process tree: ``bash`` → a process named ``claude``. p50 over 200 each.
2. Reading the last answer of a Claude Code transcript of ``BENCH_MB`` (20) MB: parsing every line of the
   file vs :func:`plugins.claude_code.reader.last_finished_turn` (a window at the end); and, once a turn
   is appended, parsing the file again vs :meth:`TranscriptTail.read_new` (only the bytes appended).

Run: ``.venv/bin/python bench/bench_steps.py`` (~30 s; temp dirs only, kills only what it started).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_claude_extract import turn  # noqa: E402

from pipeline.system import proc  # noqa: E402
from plugins.claude_code.reader import TranscriptTail, last_finished_turn  # noqa: E402

MB = float(os.environ.get("BENCH_MB", "20"))


def p50_ms(fn: Callable[[], object], times: int) -> float:
    samples = []
    for _ in range(times):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def ps_walk(pane_pid: int, names: frozenset[str]) -> int | None:
    """The naive way: one ``ps`` for the whole machine, then the pane's subtree searched in its table."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,comm="], capture_output=True, text=True).stdout
    kids: dict[int, list[tuple[int, str]]] = {}
    for row in out.splitlines():
        pid, ppid, comm = row.split(None, 2)
        kids.setdefault(int(ppid), []).append((int(pid), comm.strip()))
    todo = [pane_pid]
    while todo:
        for pid, comm in kids.get(todo.pop(0), []):
            if comm in names:
                return pid
            todo.append(pid)
    return None


def process_lookup(tmp: Path) -> None:
    (tmp / "claude").symlink_to("/bin/sleep")  # comm "claude"
    pane = subprocess.Popen(["bash", "-c", f"{tmp / 'claude'} 600; true"], start_new_session=True)
    try:
        names = frozenset({"claude"})
        deadline = time.monotonic() + 10
        while proc.find_agent(pane.pid, names) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        found = proc.find_agent(pane.pid, names)
        assert found is not None and ps_walk(pane.pid, names) == found.pid, "both ways find the same process"
        naive = p50_ms(lambda: ps_walk(pane.pid, names), 200)
        ours = p50_ms(lambda: proc.find_agent(pane.pid, names), 200)
        print(f"{'agent process under a pane: ps walk':>46}: p50 {naive:7.3f} ms", flush=True)
        print(f"{'the same from /proc (find_agent)':>46}: p50 {ours:7.3f} ms   x{ours / naive:.3f}",
              flush=True)
    finally:
        os.killpg(pane.pid, 9)
        pane.wait()


def full_parse(path: Path) -> str | None:
    """The naive way: every line parsed; the answer of the last turn that ended."""
    answer, last_text = None, None
    with open(path, "rb") as f:
        for raw in f:
            record = json.loads(raw)
            if record.get("type") == "assistant":
                content = record["message"].get("content") or []
                texts = [c.get("text", "") for c in content if c.get("type") == "text"]
                last_text = "".join(texts) or last_text
            elif record.get("type") == "system" and record.get("subtype") == "turn_duration":
                answer = last_text
    return answer


def transcript_reads(tmp: Path) -> None:
    session = str(uuid.uuid4())
    path = tmp / f"{session}.jsonl"
    parent = None
    n = 0
    with open(path, "wb") as f:
        while f.tell() < MB * 1024 * 1024:
            chunk, parent = turn(session, parent, f"prompt {n} " + "p" * 2000, f"answer {n} " + "a" * 4000)
            f.write(chunk)
            n += 1
        chunk, parent = turn(session, parent, "the last prompt", "the last answer")
        f.write(chunk)
    size = path.stat().st_size / 1024 / 1024
    end = last_finished_turn(path)
    assert full_parse(path) == "the last answer" and end is not None and end.text == "the last answer"
    naive = p50_ms(lambda: full_parse(path), 5)
    ours = p50_ms(lambda: last_finished_turn(path), 50)
    print(f"{f'last answer of a {size:.0f} MB transcript: full parse':>46}: p50 {naive:7.1f} ms", flush=True)
    print(f"{'the same from its end (last_finished_turn)':>46}: p50 {ours:7.3f} ms   x{ours / naive:.4f}",
          flush=True)
    tail = TranscriptTail(path)
    tail.prime()
    appended, reparsed = [], []
    for i in range(20):
        chunk, parent = turn(session, parent, f"new prompt {i}", f"new answer {i}")
        with open(path, "ab") as f:
            f.write(chunk)
        t0 = time.perf_counter()
        ends = tail.read_new()
        appended.append((time.perf_counter() - t0) * 1000)
        assert [e.text for e in ends] == [f"new answer {i}"]
        if i < 5:
            t0 = time.perf_counter()
            assert full_parse(path) == f"new answer {i}"
            reparsed.append((time.perf_counter() - t0) * 1000)
    naive, ours = statistics.median(reparsed), statistics.median(appended)
    print(f"{'a turn appended: the file parsed again':>46}: p50 {naive:7.1f} ms", flush=True)
    print(f"{'only the bytes appended (TranscriptTail)':>46}: p50 {ours:7.3f} ms   x{ours / naive:.5f}",
          flush=True)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        process_lookup(Path(tmp))
        transcript_reads(Path(tmp))


if __name__ == "__main__":
    main()
