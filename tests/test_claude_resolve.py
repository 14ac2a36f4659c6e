"""The resolution chain pane → process → session file → transcript, on real processes and real files.

The processes are real: a copy of ``sleep`` named ``claude`` (so /proc/PID/comm is ``claude``, as for the
real CLI started through PATH), started under a shell like in a pane, with its own environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pipeline.system import proc
from plugins.claude_code.files import project_folder_name, read_session_file, transcript_inside
from plugins.claude_code.resolve import resolve_pid
from tests.support.paths import FIXTURES
from tests.support.polling import wait_for


class FakeClaude:
    def __init__(self, shell: subprocess.Popen[bytes], pid: int, config: Path, cwd: Path) -> None:
        self.shell, self.pid, self.config, self.cwd = shell, pid, config, cwd

    def session_file(self, session_id: str, *, proc_start: str | None = None, status: str = "idle") -> Path:
        start = proc_start or str(proc.read_proc(self.pid).start_ticks)
        path = self.config / "sessions" / f"{self.pid}.json"
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_text(
            json.dumps(
                {
                    "pid": self.pid,
                    "sessionId": session_id,
                    "cwd": str(self.cwd),
                    "startedAt": int(time.time() * 1000),
                    "procStart": start,
                    "version": "2.1.197",
                    "kind": "interactive",
                    "entrypoint": "cli",
                    "status": status,
                }
            )
        )
        return path

    def transcript(self, session_id: str, folder: str | None = None, *, cleared: bool = False) -> Path:
        path = (
            self.config / "projects" / (folder or project_folder_name(str(self.cwd))) / f"{session_id}.jsonl"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [{"type": "mode", "sessionId": session_id}]
        if cleared:  # how the transcript that /clear starts begins (2.1.197)
            lines.append(
                {
                    "type": "user",
                    "sessionId": session_id,
                    "message": {
                        "role": "user",
                        "content": "<command-name>/clear</command-name>\n"
                        "<command-message>clear</command-message>",
                    },
                }
            )
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return path


@pytest.fixture
def start_claude(tmp_path: Path) -> Iterator[Callable[..., FakeClaude]]:
    started: list[subprocess.Popen[bytes]] = []
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(shutil.which("sleep"), bin_dir / "claude")

    def start(*, cwd: Path | None = None, config_var: bool = True, command: str | None = None) -> FakeClaude:
        cwd = cwd or tmp_path / "proj"
        cwd.mkdir(parents=True, exist_ok=True)
        home = tmp_path / "home"
        config = home / ".claude"
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home)}
        if config_var:
            config = tmp_path / f"config-{len(started)}"
            env["CLAUDE_CONFIG_DIR"] = str(config)
        shell = subprocess.Popen(["bash", "-c", f"{command or 'claude 300'} & wait"], cwd=cwd, env=env)
        started.append(shell)
        def execed() -> list[int]:
            """The forked child has exec'd its program: it is no longer a bash, and the kernel has set up
            its environment (comm changes a moment before /proc/PID/environ has content)."""
            return [c for c in proc.children(shell.pid) if (p := proc.read_proc(c)) and p.comm != "bash"
                    and proc.environ(c)]

        child = wait_for(execed, what="the process under the shell")[0]
        return FakeClaude(shell, child, config, cwd)

    yield start
    for shell in started:
        for child in proc.children(shell.pid):
            os.kill(child, 9)
        shell.kill()
        shell.wait()


def steps(res) -> dict[str, tuple[bool, str]]:
    return {s.step: (s.ok, s.detail) for s in res.steps}


def test_chain_goes_from_the_shell_pid_to_the_named_transcript(start_claude, monkeypatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "/nonexistent/elsewhere")  # the process's own variable wins
    claude = start_claude()
    sid = str(uuid.uuid4())
    claude.session_file(sid, status="busy")
    transcript = claude.transcript(sid)
    res = resolve_pid(claude.shell.pid)
    assert res.process.pid == claude.pid and res.process.comm == "claude"
    assert res.config == claude.config and "CLAUDE_CONFIG_DIR of the process" in steps(res)["config"][1]
    assert res.transcript == transcript and res.rule == "session-file" and res.session_id == sid
    assert [s.step for s in res.steps] == ["process", "config", "session-file", "project-dir", "transcript"]
    assert (
        all(s.ok for s in res.steps)
        and res.stopped_at is None
        and "status busy" in steps(res)["session-file"][1]
    )


def test_config_folder_defaults_to_home_of_the_process(start_claude) -> None:
    claude = start_claude(config_var=False)
    sid = str(uuid.uuid4())
    claude.session_file(sid)
    transcript = claude.transcript(sid)
    assert resolve_pid(claude.shell.pid).transcript == transcript
    assert claude.config.parent.name == "home"


def test_a_session_file_of_a_reused_pid_is_stale(start_claude) -> None:
    claude = start_claude()
    old = str(uuid.uuid4())
    claude.session_file(old, proc_start="12345")  # left behind by another process with this PID
    stale = claude.transcript(old)
    os.utime(stale, (time.time() - 60, time.time() - 60))
    res = resolve_pid(claude.shell.pid)
    ok, detail = steps(res)["session-file"]
    assert not ok and "reused PID" in detail and res.session is None
    # the stale file's transcript is older than the process: it is not taken
    assert res.transcript is None and res.stopped_at == "session-file"
    current = claude.transcript(str(uuid.uuid4()))
    res = resolve_pid(claude.shell.pid)
    assert res.transcript == current and res.rule == "newest-in-folder"


def test_a_session_id_that_is_not_a_uuid_is_refused(start_claude) -> None:
    claude = start_claude()
    secret = claude.config / "projects" / "secret.jsonl"
    secret.parent.mkdir(parents=True)
    secret.write_text("{}\n")
    claude.session_file("../secret")
    res = resolve_pid(claude.shell.pid)
    ok, detail = steps(res)["session-file"]
    assert not ok and "not a UUID" in detail and res.transcript is None


def test_after_clear_the_newer_transcript_of_the_folder_is_taken_unless_another_session_owns_it(
    start_claude,
) -> None:
    claude = start_claude()
    sid = str(uuid.uuid4())
    claude.session_file(sid)
    named = claude.transcript(sid)
    os.utime(named, (time.time() - 1, time.time() - 1))
    claude.transcript(str(uuid.uuid4()))  # a session that exited: newer, but not a /clear
    assert resolve_pid(claude.shell.pid).transcript == named
    newer = claude.transcript(str(uuid.uuid4()), cleared=True)
    res = resolve_pid(claude.shell.pid)
    assert res.transcript == newer and res.rule == "newer-transcript"
    assert "starts with /clear" in steps(res)["transcript"][1]
    # a second live Claude Code in the same folder owns that newer file: it is not ours
    other = start_claude(cwd=claude.cwd)
    other.config = claude.config
    other.session_file(newer.stem)
    res = resolve_pid(claude.shell.pid)
    assert res.transcript == named and res.rule == "session-file"


def test_the_chain_reads_proc_only_for_the_sessions_that_name_a_transcript_it_could_take(
    start_claude, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every tile's chain runs again when its transcript appears (its first prompt, a /clear). With 50
    sessions in the config folder it read /proc for each of them, on the event loop, to know which
    transcripts other live sessions own; it now asks only about the transcripts it could take."""
    claude = start_claude()
    sid = str(uuid.uuid4())
    claude.session_file(sid)
    named = claude.transcript(sid)
    os.utime(named, (time.time() - 1, time.time() - 1))
    for i in range(50):  # other sessions of the config folder, in other projects (their pids long gone)
        other = claude.config / "sessions" / f"{4_000_000 + i}.json"
        other.write_text(json.dumps({"pid": 4_000_000 + i, "sessionId": str(uuid.uuid4()),
                                     "cwd": f"/elsewhere/{i}", "procStart": "1"}))
    reads: list[int] = []
    read_proc = proc.read_proc
    monkeypatch.setattr(proc, "read_proc", lambda pid: reads.append(pid) or read_proc(pid))
    res = resolve_pid(claude.shell.pid)
    assert res.transcript == named and res.rule == "session-file"
    assert all(pid < 4_000_000 for pid in reads), f"{len(reads)} reads of /proc, {reads[-3:]}..."
    # a newer /clear transcript in the folder: only the session naming it is looked at
    newer = claude.transcript(str(uuid.uuid4()), cleared=True)
    (claude.config / "sessions" / "4000007.json").write_text(json.dumps(
        {"pid": 4_000_007, "sessionId": newer.stem, "cwd": str(claude.cwd), "procStart": "1"}))
    reads.clear()
    res = resolve_pid(claude.shell.pid)
    assert res.transcript == newer and res.rule == "newer-transcript"  # its owner is gone: ours
    assert [pid for pid in reads if pid >= 4_000_000] == [4_000_007]


def test_a_long_cwd_uses_the_hash_form_and_is_found_directly(start_claude, tmp_path: Path) -> None:
    deep = tmp_path / ("a-very-long-folder-name-" * 5) / ("and-another-one_" * 6) / "project"
    claude = start_claude(cwd=deep)
    folder = project_folder_name(str(deep))
    assert len(str(deep)) > 200 and len(folder) > 200 and folder[200] == "-"
    sid = str(uuid.uuid4())
    claude.session_file(sid)
    transcript = claude.transcript(sid, folder)
    res = resolve_pid(claude.shell.pid)
    assert res.transcript == transcript and "the encoded cwd" in steps(res)["project-dir"][1]


def test_a_folder_the_encoding_misses_is_found_by_a_scan_for_the_session(start_claude) -> None:
    claude = start_claude()
    sid = str(uuid.uuid4())
    claude.session_file(sid)
    transcript = claude.transcript(sid, folder="named-by-some-other-rule")
    res = resolve_pid(claude.shell.pid)
    assert res.transcript == transcript and "scan" in steps(res)["project-dir"][1]


def test_before_the_first_prompt_the_chain_stops_at_the_transcript(start_claude) -> None:
    claude = start_claude()
    sid = str(uuid.uuid4())
    claude.session_file(sid)
    (claude.config / "projects" / project_folder_name(str(claude.cwd))).mkdir(parents=True)
    res = resolve_pid(claude.shell.pid)
    assert res.transcript is None and res.stopped_at == "transcript"
    assert "not created yet" in steps(res)["transcript"][1]


def test_argv0_claude_is_not_claude(start_claude) -> None:
    impostor = start_claude(command="exec -a claude sleep 300")
    res = resolve_pid(impostor.shell.pid)
    assert res.process is None and res.stopped_at == "process"


def test_only_transcripts_inside_the_projects_folder_are_read(tmp_path: Path) -> None:
    config = tmp_path / ".claude"
    good = config / "projects" / "-x" / f"{uuid.uuid4()}.jsonl"
    assert transcript_inside(str(good), config) == good
    for bad in [config / "projects" / "-x" / "notes.jsonl", config / "projects" / f"{uuid.uuid4()}.jsonl",
                tmp_path / "elsewhere" / "-x" / f"{uuid.uuid4()}.jsonl",
                config / "projects" / "-x" / ".." / ".." / ".." / "-x" / f"{uuid.uuid4()}.jsonl"]:
        assert transcript_inside(str(bad), config) is None, bad


JS_ENCODER = r"""
function jCe(e){let t=0;for(let n=0;n<e.length;n++)t=(t<<5)-t+e.charCodeAt(n)|0;return t}
function jHs(e){let t=e.replace(/[^a-zA-Z0-9]/g,"-");if(t.length<=200)return t;
return`${t.slice(0,200)}-${Math.abs(jCe(e)).toString(36)}`}
process.stdout.write(JSON.stringify(JSON.parse(require("fs").readFileSync(0, "utf8")).map(jHs)));
"""


def test_folder_names_match_claude_codes_own_function() -> None:
    """Compared with the function copied from Claude Code 2.1.197, run by node (strings are UTF-16 there)."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    cwds = ["/home/dev/my-app", "/tmp/x y/ünï/日本", "/home/😀/emoji", "/" + "long-segment/" * 20,
            "/" + "ü" * 250, "/😀" * 120, "/" + "z" * 199, "/" + "z" * 200]
    result = subprocess.run(
        ["node", "-e", JS_ENCODER], input=json.dumps(cwds), capture_output=True, text=True, check=True
    )
    assert [project_folder_name(c) for c in cwds] == json.loads(result.stdout)


def test_a_transcript_symlinked_outside_the_projects_folder_is_refused(start_claude, tmp_path: Path) -> None:
    claude = start_claude()
    sid = str(uuid.uuid4())
    claude.session_file(sid)
    outside = tmp_path / "private" / "notes.jsonl"
    outside.parent.mkdir()
    outside.write_text('{"type":"assistant"}\n')
    link = claude.config / "projects" / project_folder_name(str(claude.cwd)) / f"{sid}.jsonl"
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    res = resolve_pid(claude.shell.pid)
    assert res.transcript is None
    ok, detail = steps(res)["transcript"]
    assert not ok and "outside" in detail and "refused" in detail and str(outside) in detail
    assert transcript_inside(link, claude.config) is None


def test_a_project_folder_symlinked_outside_is_refused(start_claude, tmp_path: Path) -> None:
    claude = start_claude()
    sid = str(uuid.uuid4())
    claude.session_file(sid)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / f"{sid}.jsonl").write_text('{"type":"mode"}\n')
    (claude.config / "projects").mkdir(parents=True)
    os.symlink(elsewhere, claude.config / "projects" / project_folder_name(str(claude.cwd)))
    res = resolve_pid(claude.shell.pid)
    assert res.transcript is None and "refused" in steps(res)["transcript"][1]


def test_a_symlink_inside_the_projects_folder_is_fine(start_claude) -> None:
    claude = start_claude()
    sid = str(uuid.uuid4())
    claude.session_file(sid)
    real = claude.transcript(str(uuid.uuid4()), folder="-other")
    link = claude.config / "projects" / project_folder_name(str(claude.cwd)) / f"{sid}.jsonl"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(real)
    assert resolve_pid(claude.shell.pid).transcript == link


def test_the_session_files_tmux_key_confirms_the_pane_or_stands_in_for_a_missing_file(start_claude) -> None:
    """2.1.332 names its pane in the session file (``"tmux": "s:@1.%42"``). When the claude process of the
    pane has no session file of its own (a wrapper named claude whose child wrote it), the live session
    that names this pane is the one; a file naming another pane, or of a dead process, is not."""
    claude = start_claude()
    sid = str(uuid.uuid4())
    path = claude.session_file(sid)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "tmux": "work:@1.%42"}))
    res = resolve_pid(claude.shell.pid, "%42")
    assert steps(res)["tmux"] == (True, "the session file names this pane (work:@1.%42)")
    assert "names pane %42" in steps(resolve_pid(claude.shell.pid, "%7"))["tmux"][1]  # informational only

    # the pane's claude has no file; a live process (here the pane's shell) wrote one naming the pane
    path.unlink()
    shell_start = str(proc.read_proc(claude.shell.pid).start_ticks)
    other = claude.config / "sessions" / f"{claude.shell.pid}.json"
    other.write_text(
        json.dumps({**data, "pid": claude.shell.pid, "procStart": shell_start, "tmux": "work:@1.%42"})
    )
    transcript = claude.transcript(sid)
    res = resolve_pid(claude.shell.pid, "%42")
    assert res.session is not None and res.session.path == other and res.transcript == transcript
    assert steps(res)["tmux"][0] and "names this pane" in steps(res)["tmux"][1]
    assert resolve_pid(claude.shell.pid, "%43").session is None  # names another pane
    other.write_text(json.dumps({**data, "pid": claude.shell.pid, "procStart": "1", "tmux": "work:@1.%42"}))
    assert resolve_pid(claude.shell.pid, "%42").session is None  # a reused PID: stale


def test_the_recorded_2_1_332_session_file_names_its_pane() -> None:
    session = read_session_file(FIXTURES / "claude-code-2.1.332" / "home/.claude/sessions/23573.json")
    assert session.tmux and session.pane_id and session.pane_id.startswith("%")
