"""Every input batonpass reads from outside, fuzzed (#16): routes.yaml, hook records in the spool, the text
`baton send` / `baton preview --input` take, the OpenCode store and Claude Code's session file. (The
transcripts, rollouts and the JSONL tail are fuzzed in tests/test_hostile_input.py.)

Each case ends in a clear error of the kind the caller handles, or in a correct result — never another
exception. The default profile is quick (CI); ``HYPOTHESIS_PROFILE=fuzz`` runs 100,000 cases per input.
"""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline.cmdline.options import read_input
from pipeline.engine.config import ConfigError, load_config
from pipeline.plugin.manager import load_registries
from pipeline.spool import read_records
from pipeline.system.text import sanitize
from plugins.claude_code.files import read_session_file
from plugins.opencode.reader import OpenCodeStore, StoreError
from tests.support.paths import FIXTURES

#: a case taking longer than this is a hang in the making (generous: CI shares two cores)
BOUND_MS = 5000
FAST = settings(deadline=BOUND_MS, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
REGISTRIES = load_registries()

VALID_ROUTES = [
    (Path(__file__).resolve().parent.parent / "routes.yaml").read_bytes(),
    b"version: 1\ntiles:\n  a: {pane: '%1', agent: shell}\n  b: {pane: 'w:0.1', agent: claude}\n"
    b"routes:\n  - name: r\n    from: a\n    to: b\n    match: '^OK'\n"
    b"    transform: &t {type: template, template: 'see {response}'}\n  - {from: b, to: a, transform: *t}\n",
]
YAML_BITS = st.sampled_from([b"&a ", b"*a", b"[", b"]", b"{", b"}", b": ", b"- ", b"\n", b"  ", b"'", b'"',
                             b"!!python/object:os.system ", b"<<: ", b"---\n", b"\t", b"\x00", b"\xff", b"#",
                             b"%YAML 1.1\n", b"? ", b"|\n", b">-\n", b"\xef\xbb\xbf", b"\\u0000"])


def mutations(originals: list[bytes], bits: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """A valid file with a few spans replaced by hostile bits, cut short, or repeated."""
    def mutate(data: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
        for at, length, insert in edits:
            at %= len(data) + 1
            data = data[:at] + insert + data[at + length:]
        return data
    edit = st.tuples(st.integers(0, 10_000), st.integers(0, 8), bits | st.binary(max_size=8))
    return st.builds(mutate, st.sampled_from(originals), st.lists(edit, max_size=6))


# ---- routes.yaml ---------------------------------------------------------------------------------------


def _load(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "routes.yaml"
        path.write_bytes(data)
        try:
            config, warnings = load_config(path, REGISTRIES)
        except ConfigError as exc:
            assert exc.problems and all(p.line >= 1 and p.col >= 1 for p in exc.problems), exc.problems
            assert all(p.message.strip() for p in exc.problems)
            return
        assert config.tiles  # a config that loads has what the schema requires


@FAST
@given(st.binary(max_size=4096))
def test_routes_yaml_arbitrary_bytes(data: bytes) -> None:
    _load(data)


@FAST
@given(mutations(VALID_ROUTES, YAML_BITS))
def test_routes_yaml_mutated(data: bytes) -> None:
    _load(data)


# ---- hook records in the spool (written by other processes) -------------------------------------------


VALID_RECORD = json.dumps({"agent": "claude", "pane": "%3", "written_at": 0,
                           "payload": {"session_id": "x", "hook_event_name": "Stop"}}).encode()
JSON_BITS = st.sampled_from([b"{", b"}", b"[", b"]", b'"', b",", b":", b"null", b"1e999", b"-0", b"\\u0000",
                             b"\\ud800", b"[" * 5000, b"\xff", b"\x00", b" " * 100])


@FAST
@given(st.lists(mutations([VALID_RECORD], JSON_BITS) | st.binary(max_size=512), max_size=5))
def test_spool_records(files: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for i, data in enumerate(files):
            # a fresh written_at where the mutation left the number readable, so records are not just stale
            fresh = data.replace(b'"written_at": 0', f'"written_at": {time.time()}'.encode())
            (folder / f"{i:03}-1-claude.json").write_bytes(fresh)
        records = read_records(folder)
        for record in records:
            assert isinstance(record.agent, str) and isinstance(record.payload, dict)
            assert record.pane is None or isinstance(record.pane, str)
        assert not any(name.endswith(".json") for name in os.listdir(folder))  # all consumed, none left


# ---- what `baton send` and `baton preview --input` read ---------------------------------------------


@FAST
@given(st.binary(max_size=4096))
def test_send_and_preview_input(data: bytes) -> None:
    text = read_input(io.BytesIO(data), "standard input")
    typed = sanitize(text)
    assert not UNSAFE.search(typed.replace("\n", "").replace("\t", ""))
    assert "\x1b" not in typed


# ---- the OpenCode store ----------------------------------------------------------------------------------


STORE = (FIXTURES / "opencode" / "opencode.db").read_bytes()


def _patched(data: bytes, edits: list[tuple[int, bytes]]) -> bytes:
    out = bytearray(data)
    for at, chunk in edits:
        out[at:at + len(chunk)] = chunk
    return bytes(out[:len(data)])


@FAST
@example(_patched(STORE, [(150731, b"  _")]))  # found by CI's fuzz: text left in session.time_created
@given(st.one_of(st.binary(max_size=8192),
                 st.lists(st.tuples(st.integers(0, len(STORE) - 1), st.binary(min_size=1, max_size=64)),
                          min_size=1, max_size=8).map(
                     lambda edits: _patched(STORE, edits))))
def test_opencode_store(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "opencode.db"
        path.write_bytes(data)
        store = OpenCodeStore(path, retries=0)
        try:
            for session in store.sessions():
                store.last_turn(session.id)
                store.finished_turns(session.id)
                store.state(session.id)
        except StoreError as exc:
            assert str(exc).strip()
        finally:
            store.close()


# ---- Claude Code's session file ----------------------------------------------------------------------


SESSIONS = [p.read_bytes() for p in sorted(FIXTURES.glob("claude-code*/home/.claude/sessions/*.json"))]


@FAST
@given(mutations(SESSIONS, JSON_BITS) | st.binary(max_size=1024))
def test_claude_session_file(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "123.json"
        path.write_bytes(data)
        try:
            session = read_session_file(path)
        except ValueError as exc:
            assert str(exc).strip()
            return
        assert isinstance(session.pid, int) and re.fullmatch(r"[0-9a-f-]{36}", session.session_id)
        assert session.tmux is None or isinstance(session.tmux, str)


def test_the_recorded_inputs_are_read_as_they_are(tmp_path: Path) -> None:
    """The fuzzers start from real files: those must load."""
    (tmp_path / "1.json").write_bytes(SESSIONS[0])
    assert read_session_file(tmp_path / "1.json").pid > 0
    for i, data in enumerate(VALID_ROUTES):
        (tmp_path / f"r{i}.yaml").write_bytes(data)
        assert load_config(tmp_path / f"r{i}.yaml", REGISTRIES)[0].tiles
    assert OpenCodeStore(FIXTURES / "opencode" / "opencode.db").sessions()



# ---- command-line arguments --------------------------------------------------------------------------


ARG = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40) | st.sampled_from(
    ["", " ", "%", "%-1", "%99999999999999999999", "title:", ":", ".", "a->b", "->", "-", "--", "-c",
     "\udcff", "s:0.0", "../../etc/passwd", "\x1b[201~"])


@FAST
@given(st.sampled_from(["resolve", "send", "preview", "check", "extract"]), ARG, ARG)
def test_command_line_arguments(tmp_path_factory, command: str, first: str, second: str) -> None:
    """Whatever a person (or a script) passes, the command answers with a status and words, never a
    traceback; nothing reaches a tmux server but the test's own (which does not exist)."""
    import contextlib

    from pipeline.cli import main

    folder = tmp_path_factory.mktemp("args")
    (folder / "routes.yaml").write_bytes(VALID_ROUTES[1])
    args = {"resolve": [command, first, "-L", "baton-fuzz-no-server"],
            "send": [command, first, second if second != "-" else "-x", "-L", "baton-fuzz-no-server"],
            "preview": [command, first, "-c", str(folder / "routes.yaml"), "--input", str(folder / second)],
            "check": [command, "-c", str(folder / first)],
            "extract": [command, str(folder / first), "--agent", second or "claude"]}[command]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(args)
        except SystemExit as exc:  # argparse's usage errors
            status = exc.code
    assert status in (0, 1, 2, 3), (args, status, err.getvalue())
    assert "Traceback" not in err.getvalue()
    if status:
        assert err.getvalue().strip(), (args, status)
