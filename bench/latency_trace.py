"""Where one hand-off's time goes, for ``bench_latency.py`` (``BENCH_TRACE=1``): bench-only wrappers.

Nothing of this is on the daemon's path: :func:`install` wraps a few engine methods *in the bench
process only* and records ``time.time()`` (the stand-ins' clock) at each step of a hand-off:

- ``event``: the first inotify batch read after the answer that names a file of the source's project folder;
- ``accept``: the detector takes the completion (the follower read the transcript);
- ``extracted``: the extractor has the answer; ``routed``: the router made the prompt;
- ``deliver``: the dispatcher's queue for the target starts the delivery;
- ``ready``: the target's state was ``ready`` (the last check before typing);
- ``paste``: ``Tmux.paste`` called (``paste_done``: returned);

and :func:`report` prints, per step, p50/p99 of the time since the previous step, joined with the stand-ins'
``answer`` and ``paste`` records by the answer's text (each is unique).
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from typing import Any

from pipeline.engine.stages import dispatch, extract, route
from pipeline.engine.stages.detect import CompletionDetector
from pipeline.system import inotify
from pipeline.system.tmux import Tmux

STEPS = ("answer", "event", "accept", "extracted", "routed", "deliver", "ready", "paste", "paste_done",
         "target")

#: answer text -> step -> time
marks: dict[str, dict[str, float]] = defaultdict(dict)
#: turn id -> answer text (known once extracted), completion accept times by turn id
_accepted: dict[str, float] = {}
#: inotify batches: (time, paths)
_batches: list[tuple[float, list[str]]] = []
#: target tile -> the text being delivered to it (for the readiness checks and the paste)
_delivering: dict[str, str] = {}
_pane_text: dict[str, str] = {}
#: the answers that were their target's first hand-off in this configuration
_firsts: set[str] = set()


def install() -> None:
    orig_changes = inotify.Inotify.changes

    async def changes(self: inotify.Inotify) -> tuple[list[str], bool]:
        out = await orig_changes(self)
        _batches.append((time.time(), out[0]))
        return out

    inotify.Inotify.changes = changes  # type: ignore[method-assign]

    orig_accept = CompletionDetector.accept

    async def accept(self: CompletionDetector, completion: Any) -> None:
        _accepted.setdefault(completion.turn_id, time.time())
        await orig_accept(self, completion)

    CompletionDetector.accept = accept  # type: ignore[method-assign]

    orig_extract = extract.ResponseExtractor.extract

    async def extract_(self: Any, completion: Any) -> Any:
        response = await orig_extract(self, completion)
        m = marks[response.text.strip()]
        m["extracted"] = time.time()
        if completion.turn_id in _accepted:
            m["accept"] = _accepted[completion.turn_id]
        return response

    extract.ResponseExtractor.extract = extract_  # type: ignore[method-assign]

    orig_decide = route.PromptRouter.decide

    async def decide(self: Any, response: Any) -> Any:
        out = await orig_decide(self, response)
        marks[response.text.strip()]["routed"] = time.time()
        return out

    route.PromptRouter.decide = decide  # type: ignore[method-assign]

    orig_deliver = dispatch.PromptDispatcher.deliver

    async def deliver(self: Any, prompt: Any) -> Any:
        text = prompt.text.strip()
        marks[text]["deliver"] = time.time()
        if prompt.target not in _delivering:
            _firsts.add(text)
        _delivering[prompt.target] = text
        pane = self.tiles[prompt.target].ctx.tile.pane
        _pane_text[pane] = text
        return await orig_deliver(self, prompt)

    dispatch.PromptDispatcher.deliver = deliver  # type: ignore[method-assign]

    orig_state = dispatch.target_state

    async def target_state(adapter: Any) -> Any:
        state = await orig_state(adapter)
        text = _delivering.get(adapter.ctx.name)
        if text is not None and state == "ready":
            marks[text]["ready"] = time.time()
        return state

    dispatch.target_state = target_state  # type: ignore[assignment]

    orig_paste = Tmux.paste

    async def paste(self: Tmux, pane_id: str, text: str) -> None:
        key = _pane_text.get(pane_id)
        if key is not None:
            marks[key]["paste"] = time.time()
        await orig_paste(self, pane_id, text)
        if key is not None:
            marks[key]["paste_done"] = time.time()

    Tmux.paste = paste  # type: ignore[method-assign]


def join(answers: dict[str, float], folders: dict[str, str], pastes: dict[str, float]) -> None:
    """Add the stand-ins' times: ``answers`` (text -> on disk), ``pastes`` (text -> paste seen by the
    target), and the first inotify batch after each answer naming its source's folder (text -> folder)."""
    batches = sorted(_batches)
    for text, t in answers.items():
        m = marks[text]
        m["answer"] = t
        if text in pastes:
            m["target"] = pastes[text]
        folder = folders.get(text)
        for bt, paths in batches:
            if bt >= t and folder and any(folder in p for p in paths):
                m["event"] = bt
                break


def report() -> None:
    """Per step, p50/p99 of the time since the previous step; with several pairs also the p50 of each
    target's first hand-off apart from the others' (where a first hand-off's time goes)."""
    gaps: dict[str, list[float]] = defaultdict(list)
    apart: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for text, m in marks.items():
        if "answer" not in m or "target" not in m:
            continue
        prev = None
        for step in STEPS:
            if step in m:
                if prev is not None:
                    gap = (m[step] - m[prev]) * 1000
                    gaps[f"{prev} -> {step}"].append(gap)
                    apart[f"{prev} -> {step}"][text not in _firsts].append(gap)
                prev = step
    for name, values in gaps.items():
        values.sort()
        p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
        print(f"    {name:>24}: p50 {statistics.median(values):7.2f} ms  p99 {p99:7.2f} ms  "
              f"max {values[-1]:7.2f} ms  (n={len(values)})", flush=True)
    for name, (firsts, others) in apart.items():
        if firsts and others and len(_firsts) > 1:
            print(f"    {name:>24}: p50 of first hand-offs {statistics.median(firsts):7.2f} ms, "
                  f"of the others {statistics.median(others):7.2f} ms", flush=True)
    marks.clear()
    _firsts.clear()
    _accepted.clear()
    _batches.clear()
    _delivering.clear()
    _pane_text.clear()
