"""The shared file watcher on real files, on both backends (inotify through the event loop, watchfiles):
hints for a file whose folder does not exist yet, for writes and renames, and one wake-up for a
subscription to several paths."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from pipeline.engine.watch import FileWatcher, Subscription
from pipeline.system import inotify
from tests.support.polling import aquiet_for, until

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["inotify", "watchfiles"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "inotify" and not inotify.available():
        pytest.skip("no inotify here")
    monkeypatch.setenv("BATON_WATCHER", request.param)
    return str(request.param)


async def hint(sub: Subscription, what: str) -> set[Path]:
    """The paths of the next hint (empty when the watcher restarted: then anything may have changed)."""
    with anyio.move_on_after(10):
        return await sub.wait()
    raise AssertionError(f"no hint for {what}")


async def test_hints_for_files_folders_and_renames(tmp_path: Path, backend: str) -> None:
    watcher = FileWatcher()
    target = tmp_path / "config" / "projects" / "a.jsonl"
    session = tmp_path / "sessions" / "1.json"
    session.parent.mkdir()
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run)
        with watcher.subscribe(target) as sub, watcher.subscribe(session.parent, target.parent) as both:
            await sub.wait(0.5)  # the first hint: anything may have changed before the watch began
            await both.wait(0.5)
            target.parent.mkdir(parents=True)
            await hint(sub, "the new folder")  # the watch moves down to it (a restart, and one more hint)
            await until(lambda: watcher.watching == {tmp_path / "sessions", target.parent}, 10,
                        "the watch on the new folder", interval=0.01)
            await sub.wait(0.2)
            target.write_text("one\n")
            assert target in await hint(sub, "the new file")
            with target.open("a") as f:
                f.write("two\n")
            assert target in await hint(sub, "an append")
            while await both.wait(0.2):  # what the writes above told it
                pass
            tmp = session.with_suffix(".tmp")
            tmp.write_text("{}")
            os.replace(tmp, session)
            assert session in await hint(both, "a rename into the sessions folder") | both.changed
            while await both.wait(0.2):
                pass
            target.write_text("three\n")
            assert target in await hint(both, "a write to its other path")
            tg.cancel_scope.cancel()


async def test_a_cancelled_watcher_stops_at_once_not_after_its_threads_timeout(
    tmp_path: Path, backend: str
) -> None:
    """watchfiles' awatch waits for its thread even when cancelled; the thread ends on the stop event, set
    when the cancellation comes (else Ctrl-C on ``baton history --follow`` waited out rust_timeout, 60 s)."""
    watcher = FileWatcher()
    with anyio.fail_after(20):  # far below rust_timeout
        async with anyio.create_task_group() as tg:
            tg.start_soon(watcher.run)
            with watcher.subscribe(tmp_path / "journal.sqlite3") as sub:
                await sub.wait(0.5)  # the watch is set up
                await aquiet_for(0.5, "the watcher's thread waiting for changes")
                tg.cancel_scope.cancel()


def test_a_change_reaches_exactly_the_subscriptions_it_concerns(tmp_path: Path) -> None:
    """The watcher finds the subscriptions a change concerns by looking along its path, not by asking every
    subscription: the result is what each subscription's own ``matches`` says, for paths at, under, beside
    and above the ones subscribed to (100 subscriptions, as 50 tile pairs make)."""
    watcher = FileWatcher()
    config = tmp_path / "claude"
    subs = []
    for i in range(50):
        folder = config / "projects" / f"-proj{i}"
        subs.append(watcher.subscribe(config / "sessions" / f"{100 + i}.json", folder))
        subs.append(watcher.subscribe(folder / f"{i}.jsonl"))
    subs.append(watcher.subscribe(tmp_path / "spool"))
    raws = [str(tmp_path), str(config), str(config / "sessions"), str(config / "sessions" / "101.json"),
            str(config / "sessions" / "101.json.tmp"), str(config / "sessions" / "1011.json"),
            str(config / "projects"), str(config / "projects" / "-proj1"),
            str(config / "projects" / "-proj1" / "a.jsonl"), str(config / "projects" / "-proj1" / "1.jsonl"),
            str(config / "projects" / "-proj10" / "1.jsonl"), str(config / "projects" / "-proj1x" / "x"),
            str(tmp_path / "spool" / "rec.json"), str(tmp_path / "spool"), "/elsewhere/file", "/"]
    for raw in raws:
        for sub in subs:
            sub.changed = set()
        watcher._dispatch([(None, raw)])
        for sub in subs:
            assert (Path(raw) in sub.changed) == sub.matches(raw), (raw, sub.paths)
    for sub in subs:
        sub.close()
    assert not watcher._at and not watcher._above


def test_a_claimed_file_reaches_its_claimer_and_the_others_only_while_they_listen(tmp_path: Path) -> None:
    """Codex panes of one CODEX_HOME all watch one sessions folder. A follower that claims its rollout and
    stops listening to the others (``others = False``) is woken by its own file and by nothing else, and is
    not even asked about the rest (its ``only`` is not called): a write by one of 50 tiles costs one
    subscriber. It hears everything again when it listens again; a claim it cannot be sure to recognise
    (not under its folder as written, e.g. a resolved symlink) leaves it listening."""
    watcher = FileWatcher()
    sessions = tmp_path / "codex" / "sessions"
    asked: list[tuple[int, str]] = []
    subs = []
    for i in range(50):
        subs.append(watcher.subscribe(sessions, only=lambda p, i=i: asked.append((i, p.name)) or True))
    rollouts = [sessions / "2026" / "12" / "04" / f"rollout-{i}.jsonl" for i in range(50)]
    for sub, rollout in zip(subs, rollouts, strict=True):
        sub.claim(rollout)
        sub.others = False

    def dispatch(path: Path) -> list[int]:
        for sub in subs:
            sub.changed = set()
        asked.clear()
        watcher._dispatch([(None, str(path))])
        return [i for i, sub in enumerate(subs) if path in sub.changed]

    assert dispatch(rollouts[7]) == [7] and asked == [(7, "rollout-7.jsonl")]
    assert dispatch(sessions / "2026" / "12" / "04" / "rollout-new.jsonl") == [] and asked == []
    subs[3].others = True  # say, a prompt was typed there and may start a new rollout
    assert dispatch(rollouts[7]) == [3, 7]
    assert sorted(asked) == [(3, "rollout-7.jsonl"), (7, "rollout-7.jsonl")]
    assert dispatch(sessions / "2026" / "12" / "05") == [3]
    subs[3].others = False
    subs[5].claim(tmp_path / "real-home" / "sessions" / "rollout-5.jsonl")  # not under its folder as written
    assert dispatch(rollouts[7]) == [5, 7]
    subs[5].claim(None)  # nothing claimed (no rollout yet): it listens to everything, ``others`` or not
    assert dispatch(sessions / "2026" / "12" / "04" / "rollout-new.jsonl") == [5]
    for sub in subs:
        sub.close()
    assert not watcher._at and not watcher._above and not watcher._claims
