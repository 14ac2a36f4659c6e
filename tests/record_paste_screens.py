"""Record what the REAL agent CLIs show for a pasted prompt that was not submitted (issue 31).

    .venv/bin/python -m tests.record_paste_screens [--agents claude,codex,opencode,gemini,copilot,qwen,pi,
                                                             pi-previous,cline] [--latest]

For each agent: the real CLI from npm (tests/fakes/npm_agents.py; the pins, or npm's ``latest`` with
``--latest``) runs in a private tmux server (``tmux -L baton-rec-…``, ``-f /dev/null``) with its own HOME,
config and XDG folders in a temporary directory, against the tests' fake model server on 127.0.0.1. Once
its input is idle, each case's text is passed through :func:`pipeline.system.text.sanitize` and pasted
with :meth:`pipeline.system.tmux.Tmux.paste` — the dispatcher's own paste (``paste-buffer -p -r``,
bracketed) — and NOT submitted; the screen is captured the way the adapters capture it
(``capture-pane -p -J``, and with ``-e`` for the escapes), then the input is cleared (the agent's own key,
checked on the screen; the agent is restarted if that fails) before the next case. At the end one long
paste is submitted with Enter, to show the turn starting, and one more paste follows the turn.

Writes ``tests/fixtures/<agent>-<version>/screens/paste_<case>.txt`` and ``.ansi.txt``, and
``paste_cases.json`` beside them: every case's exact pasted text, its counts (lines, newlines, code
points, UTF-16 units, bytes), the order of the session, how the input was cleared, what the screen showed.
Every tmux server, CLI process and daemon it starts is stopped at the end, also on failure; every wait is
bounded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from pipeline.plugin.tools import strip_ansi
from pipeline.system import proc
from pipeline.system.text import sanitize
from pipeline.system.tmux import Tmux, remove_socket_file
from plugins.claude_code.screen import input_box
from plugins.cline.screen import input_draft as cline_draft
from plugins.codex.screen import composer_draft
from plugins.copilot.screen import input_draft as copilot_draft
from plugins.gemini.screen import input_draft as gemini_draft
from plugins.opencode.screen import input_draft
from plugins.pi.screen import input_draft as pi_draft
from plugins.qwen.screen import input_draft as qwen_draft

FIXTURES = Path(__file__).parent / "fixtures"
FOLDER = {"claude": "claude-code", "codex": "codex", "opencode": "opencode", "gemini": "gemini-cli",
          "copilot": "copilot", "qwen": "qwen-code", "pi": "pi", "pi-previous": "pi",
          "cline": "cline"}
START_TIMEOUT_S = 120.0
SETTLE_TIMEOUT_S = 10.0
TURN_TIMEOUT_S = 60.0


# ---- the texts ------------------------------------------------------------------------------------------

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def words(n: int, seed: int = 0) -> str:
    """Exactly ``n`` characters of words and single spaces (no space at either end)."""
    out, i = "", seed
    while len(out) < n:
        out += (" " if out else "") + WORDS[i % len(WORDS)]
        i += 1
    out = out[:n]
    return out[:-1] + "x" if out.endswith(" ") else out


def line(case: str, n: int) -> str:
    """One line of exactly ``n`` characters that starts with the case's name."""
    head = f"PASTE {case}: "
    return head + words(n - len(head)) if n > len(head) else head[:n]


def lines(case: str, count: int, total: int) -> str:
    """``count`` lines, ``total`` characters with the newlines; the first line names the case."""
    body = total - (count - 1)
    sizes = [body // count + (1 if i < body % count else 0) for i in range(count)]
    rows = [line(case, sizes[0])] + [f"{i + 1:02d} " + words(sizes[i] - 3, seed=i) for i in range(1, count)]
    text = "\n".join(rows)
    assert len(text) == total and text.count("\n") == count - 1, (case, len(text))
    return text


def emoji_line(case: str, codepoints: int, emoji: int = 10) -> str:
    """One line of ``codepoints`` code points, ``emoji`` of them outside the BMP (two UTF-16 units each)."""
    text = line(case, codepoints - emoji) + "😀" * emoji
    assert len(text) == codepoints
    return text


#: name -> the raw text handed to the paste (after sanitize() it is what was pasted), in session order
CASES: dict[str, str] = {
    "line1_short": "PASTE line1_short: one short line to review",
    "lines3_short": lines("lines3_short", 3, 120),
    "lines2_short": lines("lines2_short", 2, 80),
    "lines4": lines("lines4", 4, 100),
    "lines10_100": lines("lines10_100", 10, 100),  # pi's and Qwen Code's edge: more than 10 lines
    "lines11_110": lines("lines11_110", 11, 110),
    "lines10_trailing_newline": lines("lines10_trailing_newline", 10, 100) + "\n",  # pi: 11 lines
    "lines12_280": lines("lines12_280", 12, 280),
    "line150": line("line150", 150),
    "line151": line("line151", 151),
    "line800": line("line800", 800),
    "line801": line("line801", 801),
    "line900": line("line900", 900),
    "lines3_chars1000": lines("lines3_chars1000", 3, 1000),
    "lines3_chars1001": lines("lines3_chars1001", 3, 1001),
    "line1000": line("line1000", 1000),
    "line1001": line("line1001", 1001),
    "line1500": line("line1500", 1500),
    "lines30_2000": lines("lines30_2000", 30, 2000),
    "emoji_cp145": emoji_line("emoji_cp145", 145),
    "emoji_cp795": emoji_line("emoji_cp795", 795),
    "emoji_cp995": emoji_line("emoji_cp995", 995),
    "emoji_cp991": emoji_line("emoji_cp991", 991),  # 1001 UTF-16 units: pi counts units, Qwen code points
    "trailing_newlines": lines("trailing_newlines", 3, 90) + "\n\n",
    "tabs": "PASTE tabs:\tone\ttab\tbetween\twords " + words(60),
}
#: two pastes into one input, without clearing in between
TWO_PASTES = ("two_pastes_a", lines("two_pastes_a", 4, 120), "two_pastes_b", lines("two_pastes_b", 4, 120))
#: two identical long pastes (Codex numbers a repeated placeholder)
SAME_TWICE = ("same_twice", lines("same_twice", 20, 1200))
#: pasted, then submitted with Enter
SUBMITTED = ("submitted", lines("submitted", 10, 1100))
#: pasted in a short pane (Claude Code's limit on lines follows the terminal's rows)
SHORT_CASES = ("lines2_short", "lines3_short", "lines4")
AFTER_TURN = ("after_turn", lines("after_turn", 5, 150))
ANSWER = "Noted: the pasted text arrived.\n\n" + "\n".join(f"- point {i}: " + words(50, i) for i in range(12))


#: every placeholder form seen on these agents' screens (for the summary in paste_cases.json only)
PLACEHOLDER = re.compile(r"\[Pasted (?:text #\d+(?: \+\d+ lines)?|Content \d+ chars|~\d+ lines)\](?: #\d+)?"
                         r"|\[Pasted Text: \d+ (?:lines|chars)(?: #\d+)?\]|\[Paste #\d+ - \d+ lines\]"
                         r"|\[paste #\d+ (?:\+\d+ lines|\d+ chars)\]"
                         r"|\[[^\[\]]*?\.\.\. Pasted \+\d+\s+lines\]")  # Cline's, maybe wrapped


def counts(text: str) -> dict[str, int]:
    return {"lines": text.count("\n") + 1, "newlines": text.count("\n"), "codepoints": len(text),
            "utf16_units": len(text.encode("utf-16-le")) // 2, "utf8_bytes": len(text.encode("utf-8"))}


# ---- the agents -----------------------------------------------------------------------------------------

@dataclass
class Launch:
    command: str
    cwd: Path
    env: dict[str, str]


@dataclass
class Agent:
    """How to start one CLI offline, read its input, and clear it."""

    name: str
    width: int
    height: int
    #: (root, binary, version, fake server url) -> how to start it
    launch: Callable[[Path, Path, str, str], Launch]
    #: the text in the input ("" empty, None when no input shows), from a capture with escapes
    draft: Callable[[str], str | None]
    #: extra words that must show before the agent counts as ready
    ready_marker: str
    #: key sequences tried in order to clear a draft
    clear_keys: tuple[tuple[str, ...], ...]
    #: pane heights to paste short multi-line texts in at the end (Claude Code's line limit follows the rows)
    short_rows: tuple[int, ...] = ()


def _claude_launch(root: Path, binary: Path, version: str, url: str) -> Launch:
    from tests.support.claude import make_claude_home

    home = make_claude_home(root, api_url=url, claude_bin=binary, version=version)
    return Launch(f"{home.shell_command()} -c claude", home.project, {})


def _node_dir() -> str:
    """Where ``node`` is: the npm packages' commands are node scripts, and the pane's PATH is minimal."""
    node = shutil.which("node")
    return str(Path(node).parent) if node else "/usr/bin"


def _codex_launch(root: Path, binary: Path, version: str, url: str) -> Launch:
    from tests.fakes.openai_responses import codex_config

    home, project = root / "codex-home", root / "api"
    for folder in (home, project, root / "home"):
        folder.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(codex_config(url, trusted=(str(project),)))
    env = {"HOME": str(root / "home"), "CODEX_HOME": str(home), "FAKE_KEY": "sk-fake-test",
           "XDG_STATE_HOME": str(root / "state"), "TERM": "tmux-256color", "LANG": "C.UTF-8",
           "PATH": f"{binary.parent}:{_node_dir()}:/usr/local/bin:/usr/bin:/bin"}
    return Launch(str(binary), project, env)


def _opencode_launch(root: Path, binary: Path, version: str, url: str) -> Launch:
    from tests.fakes.openai_chat import opencode_config

    home, project = root / "home", root / "web"
    project.mkdir(parents=True, exist_ok=True)
    env = {
        "HOME": str(home), "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local/state"), "XDG_CACHE_HOME": str(home / ".cache"),
        "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_SHARE": "1",
        "npm_config_registry": "http://127.0.0.1:9/", "NPM_CONFIG_REGISTRY": "http://127.0.0.1:9/",
        "TERM": "tmux-256color", "LANG": "C.UTF-8",
        "PATH": f"{binary.parent}:{_node_dir()}:/usr/local/bin:/usr/bin:/bin",
    }
    for key in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    (home / ".config" / "opencode").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(opencode_config(url)))
    return Launch("opencode", project, env)


def _gemini_launch(root: Path, binary: Path, version: str, url: str) -> Launch:
    from tests.support.gemini import make_gemini_home

    home = make_gemini_home(root, api_url=url, gemini_bin=binary)
    return Launch(f"{home.shell_command()} -c gemini", home.project, {})


def _copilot_launch(root: Path, binary: Path, version: str, url: str) -> Launch:
    from tests.support.copilot import make_copilot_home

    home = make_copilot_home(root, api_url=url, copilot_bin=binary, version=version)
    return Launch(f"{home.shell_command()} -c copilot", home.project, {})


def _qwen_launch(root: Path, binary: Path, version: str, url: str) -> Launch:
    from tests.fakes.npm_agents import node_22_dir
    from tests.support.qwen import make_qwen_home

    home = make_qwen_home(root, api_url=url, qwen_bin=binary, node_dir=node_22_dir())
    return Launch(f"{home.shell_command()} -c qwen", home.project, {})


def _pi_launch(root: Path, binary: Path, version: str, url: str) -> Launch:
    from tests.fakes.npm_agents import node_22
    from tests.support.pi import make_pi_home

    home = make_pi_home(root, api_url=url, pi_bin=binary, node=node_22())
    return Launch(f"{home.shell_command()} -c pi", home.project, {})


def _cline_launch(root: Path, binary: Path, version: str, url: str) -> Launch:
    from tests.support.cline import make_cline_home

    home = make_cline_home(root, api_url=url, cline_bin=binary)
    return Launch(f"{home.shell_command()} -c cline", home.project, {})


def _opencode_draft(screen: str) -> str | None:
    plain = strip_ansi(screen)
    if "╹▀" not in plain:
        return None
    return input_draft(plain)


AGENTS: dict[str, Agent] = {
    "claude": Agent("claude", 120, 40, _claude_launch, input_box, "❯",
                    (("C-c",), ("Escape", "Escape"), ("C-u",)), short_rows=(12, 11, 10)),
    "codex": Agent("codex", 160, 48, _codex_launch, composer_draft, "gpt-fake",
                   (("C-c",), ("C-u",))),
    "opencode": Agent("opencode", 160, 45, _opencode_launch, _opencode_draft, "Ask anything",
                      (("C-c",), ("C-u",))),
    # the size of the recordings made with the adapters (tests/fixtures/gemini-cli-0.61.0, copilot-1.0.102)
    "gemini": Agent("gemini", 200, 50, _gemini_launch, gemini_draft, "Type your message",
                    (("C-c",), ("C-u",))),
    "copilot": Agent("copilot", 200, 50, _copilot_launch, copilot_draft, "❯", (("C-c",), ("C-u",))),
    # the size of the recordings made with the adapters (tests/fixtures/qwen-code-0.24.4, pi-1.6.0)
    "qwen": Agent("qwen", 120, 40, _qwen_launch, qwen_draft, "Type your message", (("C-c",), ("C-u",))),
    "pi": Agent("pi", 120, 40, _pi_launch, pi_draft, "fake-model", (("C-c",), ("C-u",))),
    "pi-previous": Agent("pi-previous", 120, 40, _pi_launch, pi_draft, "fake-model", (("C-c",), ("C-u",))),
    # Ctrl+C clears a draft (on an empty input it exits: the recorder starts it again)
    "cline": Agent("cline", 120, 40, _cline_launch, cline_draft, "❯", (("C-c",),)),
}


# ---- fake servers ---------------------------------------------------------------------------------------

@contextlib.contextmanager
def fake_server(agent: str) -> Iterator[str]:
    """The agent's fake model server on 127.0.0.1, answering slowly enough to see a turn start."""
    if agent == "claude":
        from tests.fakes.claude_api import ClaudeAPI

        with ClaudeAPI(answers=[ANSWER], chunk_delay_s=0.15) as api:
            yield api.url
    elif agent == "codex":
        from tests.fakes.openai_responses import FakeResponses, Reply

        fake = FakeResponses().start()
        fake.default = Reply(ANSWER, chunk_delay_s=1.0)  # it streams 5 chunks: 5 s of a turn
        try:
            yield fake.base_url
        finally:
            fake.stop()
    elif agent == "gemini":
        from tests.fakes.gemini_api import FakeGemini

        with FakeGemini(answer=lambda prompt: ANSWER) as api:
            yield api.url
    else:
        from tests.fakes.openai_chat import FakeChat

        with FakeChat(chunk_delay_s=0.15) as chat:
            chat.default = ANSWER
            yield chat.url


# ---- the session ----------------------------------------------------------------------------------------

@dataclass
class Session:
    agent: Agent
    tmux: Tmux
    launch: Launch
    out: Path
    pane: str = ""
    seen: dict[int, proc.Proc] = field(default_factory=dict)
    log: list[dict[str, object]] = field(default_factory=list)
    restarts: int = 0
    #: the random part of the temporary folder's name, as it shows in the agents' headers and status lines
    token: str = ""

    async def start(self) -> None:
        env = " ".join(shlex.quote(f"{k}={v}") for k, v in self.launch.env.items())
        command = f"exec env -i {env} {self.launch.command}" if env else f"exec {self.launch.command}"
        if self.pane:
            await self.tmux.run("respawn-pane", "-k", "-t", self.pane, "-c", str(self.launch.cwd), command)
        else:
            self.pane = (await self.tmux.run(
                "new-session", "-d", "-P", "-F", "#{pane_id}", "-s", "rec", "-x", str(self.agent.width),
                "-y", str(self.agent.height), "-c", str(self.launch.cwd), command)).strip()
            # an agent that quits (Gemini CLI on a second Ctrl+C) leaves its pane to be restarted in
            await self.tmux.run("set-option", "-p", "-t", self.pane, "remain-on-exit", "on")
        await self.until(lambda s: self.agent.ready_marker in strip_ansi(s) and self.agent.draft(s) == "",
                         START_TIMEOUT_S, "the idle input")
        await self.note_processes()

    async def note_processes(self) -> None:
        pid = int((await self.tmux.run("display-message", "-p", "-t", self.pane, "#{pane_pid}")).strip())
        for p in proc.subtree(pid):
            self.seen[p.pid] = p

    async def screen(self) -> str:
        return await self.tmux.capture(self.pane, escapes=True)

    async def until(self, ok: Callable[[str], object], timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = await self.screen()
            if ok(screen):
                return screen
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.agent.name}: no {what} after {timeout}s; the screen:\n"
                                   + strip_ansi(screen))
            await anyio.sleep(0.1)

    async def settled(self, before: str) -> str:
        """The screen once it changed from ``before`` and then stayed the same for 0.6 s."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        last, since = await self.screen(), time.monotonic()
        while time.monotonic() < deadline:
            await anyio.sleep(0.1)
            now = await self.screen()
            if now != last:
                last, since = now, time.monotonic()
            elif now != before and time.monotonic() - since >= 0.6:
                break
        return last

    async def record(self, case: str, screen_ansi: str | None = None) -> dict[str, object]:
        """Write the two captures of ``case`` (taken now, the plain one right after the escaped one)."""
        ansi = screen_ansi if screen_ansi is not None else await self.screen()
        plain = await self.tmux.capture(self.pane)
        if strip_ansi(ansi) != plain:  # the screen moved between the two captures: take both again
            ansi = await self.screen()
            plain = await self.tmux.capture(self.pane)
        (self.out / f"paste_{case}.ansi.txt").write_text(self.anonymous(ansi))
        (self.out / f"paste_{case}.txt").write_text(self.anonymous(plain))
        return {"files": [f"paste_{case}.txt", f"paste_{case}.ansi.txt"],
                "placeholders_on_screen": [" ".join(m.split()) for m in PLACEHOLDER.findall(plain)],
                "draft_read_by_adapter": self.agent.draft(ansi)}

    def anonymous(self, screen: str) -> str:
        """The random part of the temporary folder's name as ``XXXXXXXX`` (the same width: nothing moves),
        so that two runs give the same screens."""
        return screen.replace(self.token, "X" * len(self.token)) if self.token else screen

    async def paste(self, text: str) -> str:
        before = await self.screen()
        await self.tmux.paste(self.pane, sanitize(text))
        return await self.settled(before)

    async def clear(self) -> str:
        """Empty the input with the agent's keys (checked on the screen), else restart the agent."""
        for keys in self.agent.clear_keys:
            await self.tmux.send_keys(self.pane, *keys)
            with contextlib.suppress(TimeoutError):
                await self.until(lambda s: self.agent.draft(s) == "", 3.0, "empty input")
                await anyio.sleep(0.3)
                if self.agent.draft(await self.screen()) == "":
                    return " then ".join(keys)
        self.restarts += 1
        await self.start()
        return "restart"

    async def paste_case(self, case: str, *texts: str, later_s: float = 0.0) -> None:
        entry: dict[str, object] = {"case": case, "restart_count_before": self.restarts}
        screen = ""
        for text in texts:
            screen = await self.paste(text)
        entry.update(await self.record(case, screen))
        if later_s:
            await anyio.sleep(later_s)
            entry[f"after_{later_s:g}s"] = await self.record(f"{case}_after_{later_s:g}s")
        entry["cleared_with"] = await self.clear()
        self.log.append(entry)
        print(f"  {case}: {entry['draft_read_by_adapter']!r:.70} (cleared: {entry['cleared_with']})",
              flush=True)

    async def submit_case(self) -> None:
        case, text = SUBMITTED
        screen = await self.paste(text)
        entry: dict[str, object] = {"case": case, **await self.record(f"{case}_draft", screen)}
        await self.tmux.send_keys(self.pane, "Enter")
        await anyio.sleep(0.3)
        entry["after_enter_0.3s"] = await self.record(f"{case}_after_enter")
        await self.until(lambda s: ANSWER.splitlines()[0] in strip_ansi(s), TURN_TIMEOUT_S,
                         "the answer streaming")
        entry["streaming"] = await self.record(f"{case}_streaming")
        await self.until(lambda s: "point 11" in strip_ansi(s) and self.agent.draft(s) == "", TURN_TIMEOUT_S,
                         "the turn's end")
        await anyio.sleep(2.0)
        entry["done"] = await self.record(f"{case}_done")
        self.log.append(entry)
        print(f"  {case}: submitted, turn done", flush=True)
        await self.paste_case(AFTER_TURN[0], AFTER_TURN[1])


    async def short_pane(self, rows: int) -> None:
        """The window resized to ``rows`` lines, then 2-, 3- and 4-line pastes (resized back after)."""
        await self.tmux.run("resize-window", "-t", self.pane, "-y", str(rows))
        await anyio.sleep(1.0)
        try:
            for case in SHORT_CASES:
                await self.paste_case(f"rows{rows}_{case}", CASES[case])
        finally:
            await self.tmux.run("resize-window", "-t", self.pane, "-y", str(self.agent.height))
            await anyio.sleep(1.0)


async def record_agent(name: str, latest: bool) -> Path:
    from tests.agent_versions import PI_PREVIOUS, PINNED
    from tests.fakes.npm_agents import install, node_22

    agent = AGENTS[name]
    package, version = PI_PREVIOUS if name == "pi-previous" else PINNED[name]
    if latest and name != "pi-previous":  # the old package is frozen: it has no newer release
        os.environ["BATON_AGENTS"] = "latest"
        from tests.agent_versions import resolve

        package, version = resolve(name)
    binary = install(package, version, node=node_22() if name in ("pi", "qwen") else None)
    out = FIXTURES / f"{FOLDER[name]}-{version}" / "screens"
    out.mkdir(parents=True, exist_ok=True)
    for old in _recorded_before(out):  # a run replaces its whole set: no screen of an older run stays behind
        old.unlink()
    print(f"{name}: {package}@{version} -> {out.relative_to(FIXTURES.parent.parent)}", flush=True)
    socket = f"baton-rec-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmux = Tmux(socket_name=socket, config_file="/dev/null", control=False)
    root = Path(tempfile.mkdtemp(prefix=f"baton-rec-{name}-"))
    session: Session | None = None
    try:
        with fake_server(name) as url:
            session = Session(agent, tmux, agent.launch(root, binary, version, url), out,
                              token=root.name.rsplit("-", 1)[-1])
            await session.start()
            idle = await session.settled("")  # the header may still be drawing when the input shows
            session.log.append({"case": "idle", **await session.record("idle", idle)})
            for case, text in CASES.items():
                await session.paste_case(case, text, later_s=9.0 if case == "lines30_2000" else 0.0)
            await session.paste_case("two_pastes", TWO_PASTES[1], TWO_PASTES[3])
            await session.paste_case(SAME_TWICE[0], SAME_TWICE[1], SAME_TWICE[1])
            await session.note_processes()
            await session.submit_case()
            await session.note_processes()
            for rows in agent.short_rows:
                await session.short_pane(rows)
        write_cases(out, name, package, version, agent, session)
    finally:
        await anyio.to_thread.run_sync(lambda: stop_everything(tmux, session, root))
    return out


def _recorded_before(out: Path) -> list[Path]:
    """The files an earlier run wrote (those its paste_cases.json lists, and itself); screens recorded by
    hand beside them (pi's ``paste_lines14.txt``) stay."""
    facts = out / "paste_cases.json"
    if not facts.exists():
        return []
    shots = json.loads(facts.read_text(encoding="utf-8"))["session"]
    names = {f for shot in shots for entry in (shot, *(v for v in shot.values() if isinstance(v, dict)))
             for f in entry.get("files", ())}
    return [facts, *(out / n for n in sorted(names) if (out / n).exists())]


def write_cases(out: Path, name: str, package: str, version: str, agent: Agent, session: Session) -> None:
    short = {f"rows{r}_{c}": CASES[c] for r in agent.short_rows for c in SHORT_CASES}
    texts = {**CASES, **short, TWO_PASTES[0]: TWO_PASTES[1], TWO_PASTES[2]: TWO_PASTES[3],
             SAME_TWICE[0]: SAME_TWICE[1], SUBMITTED[0]: SUBMITTED[1], AFTER_TURN[0]: AFTER_TURN[1]}
    pasted = {k: sanitize(v) for k, v in texts.items()}
    doc = {
        "agent": name, "package": package, "version": version,
        "pane": {"width": agent.width, "height": agent.height},
        "capture": "paste_<case>.txt: tmux capture-pane -p -J; paste_<case>.ansi.txt: capture-pane -p -J -e",
        "paste": "Tmux.paste(pane, sanitize(raw)): set/load-buffer, paste-buffer -p -r -d (bracketed)",
        "cases": {k: {"raw": texts[k], "pasted": pasted[k], **({"raw_differs": True} if texts[k] != pasted[k]
                                                                 else {}), **counts(pasted[k])}
                  for k in texts},
        "pastes_per_case": {"two_pastes": ["two_pastes_a", "two_pastes_b"],
                            "same_twice": ["same_twice", "same_twice"]},
        "session": session.log,
        "restarts": session.restarts,
    }
    (out / "paste_cases.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


def stop_everything(tmux: Tmux, session: Session | None, root: Path) -> None:
    """The tmux server, every process seen in the agent's pane, and a Codex app-server daemon (by the
    PIDs it recorded, and only if they run a binary from our temporary home); then the temporary folder."""
    tmux.run_sync("kill-server", check=False)
    remove_socket_file(tmux.socket_file)
    pids = []
    for name in ("daemon.pid", "daemon-updater.pid"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            pid = int(json.loads((root / "codex-home" / "app-server-daemon" / name).read_text())["pid"])
            if os.readlink(f"/proc/{pid}/exe").startswith(str(root) + "/"):
                pids.append(pid)
    left = [p for p in (session.seen.values() if session else []) if _same(p)] + [
        p for p in (proc.read_proc(pid) for pid in pids) if p is not None]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in left:
            if _same(p):
                with contextlib.suppress(OSError):
                    os.kill(p.pid, sig)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_same(p) for p in left):
            time.sleep(0.1)
    shutil.rmtree(root, ignore_errors=True)


def _same(p: proc.Proc) -> bool:
    live = proc.read_proc(p.pid)
    return live is not None and live.start_ticks == p.start_ticks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.record_paste_screens",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--agents", default=",".join(AGENTS), help="comma-separated: " + ",".join(AGENTS))
    parser.add_argument("--latest", action="store_true", help="npm's latest versions instead of the pins")
    args = parser.parse_args(argv)
    names = [a.strip() for a in args.agents.split(",") if a.strip()]
    unknown = [a for a in names if a not in AGENTS]
    if unknown:
        print(f"unknown agent(s): {', '.join(unknown)}; known: {', '.join(AGENTS)}", file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        try:
            anyio.run(record_agent, name, args.latest)
        except Exception as exc:  # one agent failing must not stop the others; say what and go on
            failed += 1
            print(f"{name}: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
