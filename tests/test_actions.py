"""The actions people take from outside a pane (pipeline.engine.actions): ``baton approve``/``deny`` on real
panes running stand-ins of each agent (tests/fakes/agent_tui.py and the demo agent) that draw the agent's
permission prompt and log every key they get; hold, resume and retry against a real daemon and journal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline.engine.actions import Action, perform
from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext, make_adapter
from pipeline.engine.journal import Journal, default_journal_path
from pipeline.plugin.agents import AgentAdapter
from pipeline.plugin.manager import load_registries
from pipeline.system.tmux import Tmux
from plugins.pi.screen import input_draft as pi_draft
from tests.support.agents import demo_agent_command, messages, read_log, start_agent
from tests.support.cli import baton, following_history, json_lines, shell_ready, start_baton, write_routes
from tests.support.daemons import wait_followed, write_config
from tests.support.polling import wait_for
from tests.support.standin_targets import TARGETS, StandinTarget, say
from tests.support.tmux import TmuxServer

FIXTURES = Path(__file__).parent / "fixtures"


def _asking(tmux_server: TmuxServer, tmp_path: Path, agent: str) -> tuple[StandinTarget, Path]:
    """A stand-in of ``agent`` in tile ``b``, showing its permission prompt (pi, which asks nothing before a
    tool: its question at start whether to trust the folder)."""
    standin = StandinTarget(tmux_server, tmp_path, agent, work_s=0.1, trust_dialog=agent == "pi")
    config = write_routes(tmp_path, tmux_server.socket, {"b": standin.tile})
    if agent == "pi":
        wait_for(lambda: "Trust project folder?" in tmux_server.capture(standin.pane), what="pi asking")
        return standin, config
    say(tmux_server, standin.pane, "NEEDS_APPROVAL: touch a file")
    asks = "allow? [y/n]" if agent == "demo" else ""
    wait_for(lambda: any(w in tmux_server.capture(standin.pane) for w in (
        asks or "Do you want to proceed?", "Would you like to run", "Permission required",
        "Allow execution of", "Do you want to run this command?", "Approve tool call?")),
        what=f"the {agent} stand-in asking")
    return standin, config


def _answers(standin: StandinTarget) -> list[str]:
    return [r.get("approval") or r.get("answer", "") for r in read_log(standin.log)
            if "approval" in r or r.get("event") == "approval" and r.get("answer")]


def _went_on(screen: str, agent: str, approved: bool) -> bool:
    """The agent went on as the answer says: answered the prompt's turn (the demo agent, an echo, repeats
    the prompt), or said it was refused; pi, trusted or not, shows its input box."""
    if agent == "pi":
        return pi_draft(screen) == ""
    went_on = screen.count("NEEDS_APPROVAL: touch a file") == 2 if agent == "demo" else "answer to:" in screen
    return went_on if approved else not went_on and "efused" in screen


@pytest.mark.parametrize("agent", TARGETS)
@pytest.mark.parametrize("approve", [True, False], ids=["approve", "deny"])
def test_approve_and_deny_answer_each_agents_prompt_with_its_own_keys(
        agent: str, approve: bool, tmux_server: TmuxServer, tmp_path: Path) -> None:
    standin, config = _asking(tmux_server, tmp_path, agent)
    verb = "approve" if approve else "deny"
    done = baton(verb, "b", "-c", str(config), env=standin.env())
    assert done.status == 0, done.err
    assert "it left the screen" in done.out and "Traceback" not in done.err
    said = "approved" if approve else "denied"
    wait_for(lambda: _answers(standin) == [said], what=f"the stand-in {said}")
    wait_for(lambda: _went_on(tmux_server.capture(standin.pane), agent, approve),
             what=f"the agent after {verb}")
    # the second answer finds no prompt: nothing typed, and it says so
    again = baton(verb, "b", "-c", str(config), env=standin.env())
    again.one_line_error(1, "shows no permission prompt now", "nothing typed")
    keys = [r for r in read_log(standin.log) if "key" in r]
    assert len(_answers(standin)) == 1, keys
    rows = Journal(default_journal_path()).actions()
    assert [(r.kind, r.target, r.origin, r.outcome) for r in rows] == [
        (verb, "b", "cli", "done"), (verb, "b", "cli", "refused")]


def test_hold_keeps_a_routes_hand_offs_queued_and_resume_delivers_them_once(
        tmux_server: TmuxServer, tmp_path: Path, daemon_factory) -> None:
    a, b = start_agent(tmux_server, tmp_path / "a.jsonl", "a", work_s=0.1), tmp_path / "b.jsonl"
    b_pane = start_agent(tmux_server, b, "b", work_s=0.1)
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                          {"a": {"pane": a, "agent": "demo"}, "b": {"pane": b_pane, "agent": "demo"}},
                          [{"name": "ab", "from": "a", "to": "b"}])
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "a")
    held = baton("hold", "ab", "-c", str(config))
    assert held.status == 0 and "route ab held" in held.out, held
    baton("hold", "a->b", "-c", str(config)).one_line_error(1, "route ab is held already", "by cli")
    tmux_server.type(a, "one")
    wait_for(lambda: _states() == ["held"], what="the hand-off held")
    shown = json_lines(baton("history", "--json", "--outcome", "held").out)
    assert [h["prompt"] for h in shown] == ["one"] and "held by cli" in shown[0]["note"], shown
    assert messages(b) == []
    status = baton("status", "-c", str(config))
    assert "route ab: held by cli since" in status.out and "1 hand-off queued" in status.out, status
    resumed = baton("resume", "ab", "-c", str(config))
    assert resumed.status == 0 and "route ab resumed" in resumed.out, resumed
    wait_for(lambda: _states() == ["delivered"], what="the hand-off delivered")
    assert messages(b) == ["one"]
    baton("resume", "ab", "-c", str(config)).one_line_error(1, "route ab is not held")
    tmux_server.type(a, "two")  # not held any more: it goes at once
    wait_for(lambda: _states() == ["delivered", "delivered"], what="the next hand-off delivered")
    assert daemon.stop() == 0
    assert messages(b) == ["one", "two"]
    shown = json_lines(baton("history", "--json", "--refused").out)  # the refused ones changed nothing
    actions = [r for r in shown if r.get("kind") == "action"]
    assert [(r["route"], r["state"], r["origin"]) for r in actions] == [
        ("hold", "done", "cli"), ("hold", "refused", "cli"), ("resume", "done", "cli"),
        ("resume", "refused", "cli")]
    table = baton("history").out
    assert "hold" in table and "ab from cli: route ab held" in table, table


def test_a_held_route_steps_aside_other_routes_to_its_tile_go_on_and_its_own_keep_their_order(
        tmux_server: TmuxServer, tmp_path: Path, daemon_factory) -> None:
    """Holding a->b holds a->b only: c's hand-offs to b go on meanwhile; on resume a's two go, in order."""
    a = start_agent(tmux_server, tmp_path / "a.jsonl", "a", work_s=0.1)
    c = start_agent(tmux_server, tmp_path / "c.jsonl", "c", work_s=0.1)
    b = tmp_path / "b.jsonl"
    b_pane = start_agent(tmux_server, b, "b", work_s=0.1)
    tiles = {name: {"pane": pane, "agent": "demo"} for name, pane in (("a", a), ("b", b_pane), ("c", c))}
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket, tiles,
                          [{"name": "ab", "from": "a", "to": "b"}, {"name": "cb", "from": "c", "to": "b"}])
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "a")
    wait_followed(daemon, "c")
    assert baton("hold", "ab", "-c", str(config)).status == 0
    tmux_server.type(a, "a one")
    wait_for(lambda: _states() == ["held"], what="a's hand-off held")
    tmux_server.type(a, "a two")
    wait_for(lambda: len(_states()) == 2, what="a's second hand-off queued")
    tmux_server.type(c, "c one")  # another route to the same tile: not held
    wait_for(lambda: messages(b) == ["c one"], what="c's hand-off delivered past the held route")
    tmux_server.type(c, "c two")
    wait_for(lambda: messages(b) == ["c one", "c two"], what="c's second hand-off")
    assert baton("resume", "ab", "-c", str(config)).status == 0
    wait_for(lambda: messages(b) == ["c one", "c two", "a one", "a two"], what="a's hand-offs, in order")
    wait_for(lambda: _states() == ["delivered"] * 4, what="every hand-off delivered")
    assert daemon.stop() == 0
    assert daemon.stderr().count("held        ab@") == 1, daemon.stderr()  # said once, for the first


def test_retry_types_a_failed_hand_off_again_once(tmux_server: TmuxServer, tmp_path: Path,
                                                  daemon_factory) -> None:
    a = start_agent(tmux_server, tmp_path / "a.jsonl", "a", work_s=0.1)
    b = shell_ready(tmux_server)  # no agent yet: the hand-off fails
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                          {"a": {"pane": a, "agent": "demo"}, "b": {"pane": b, "agent": "demo"}},
                          [{"from": "a", "to": "b"}], give_up_s=0.5)
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "a")
    tmux_server.type(a, "again")
    wait_for(lambda: _states() == ["failed"], what="the hand-off failed")
    assert daemon.stop() == 0
    key = Journal(default_journal_path()).history()[0].key
    blog = tmp_path / "b.jsonl"
    tmux_server.type(b, "exec " + demo_agent_command("b", work_s=0.1, log=blog))
    wait_for(lambda: "demo❯" in tmux_server.capture(b), what="the demo agent in b's pane")
    both = [start_baton("retry", key, "-c", str(config), stderr=tmp_path / f"retry{i}.err") for i in (1, 2)]
    statuses = sorted(p.wait(timeout=60) for p in both)
    assert statuses == [0, 1], [(tmp_path / f"retry{i}.err").read_text() for i in (1, 2)]
    wait_for(lambda: messages(blog) == ["again"], what="the retried hand-off typed")
    assert _states() == ["delivered"]
    record = Journal(default_journal_path()).handoff(key)
    assert record is not None and record.attempts >= 1
    late = baton("retry", key, "-c", str(config))
    late.one_line_error(1, f"hand-off {key} is delivered, not failed")
    baton("retry", "nope@1", "-c", str(config)).one_line_error(1, "no hand-off 'nope@1'")
    assert messages(blog) == ["again"]


def _states() -> list[str]:
    return [h.state for h in Journal(default_journal_path()).history()]


# ---- perform(): the one entry of the CLI, the web page and the bus ----------------------------------------


@pytest.mark.anyio
async def test_send_through_perform_is_baton_sends_path_and_journal(tmux_server: TmuxServer,
                                                                    tmp_path: Path) -> None:
    blog = tmp_path / "b.jsonl"
    b = start_agent(tmux_server, blog, "b", work_s=0.1)
    config = write_routes(tmp_path, tmux_server.socket, {"b": {"pane": b, "agent": "demo"}})
    sent = await perform(Action("send", "b", "hello from the page", origin="web 127.0.0.1"),
                         config_path=config)
    assert sent.ok and sent.message.startswith(f"sent 19 chars to {b} (demo, tile b)"), sent
    wait_for(lambda: tmux_server.capture(b).count("hello from the page") == 2, what="the echo answered")
    # busy: refused as baton send refuses, nothing typed
    busy = await perform(Action("send", "b", "NEEDS_APPROVAL: now"), config_path=config)
    wait_for(lambda: "allow? [y/n]" in tmux_server.capture(b), what="b asking")
    refused = await perform(Action("send", "b", "not now", origin="web 127.0.0.1"), config_path=config)
    assert busy.ok and not refused.ok and "is busy with a turn" in refused.message, refused
    rows = json_lines(baton("history", "--json", "--refused").out)
    sends = [(r["route"], r["state"], r.get("origin")) for r in rows]
    # in time order: each hand-off, then its action's outcome (recorded once the send had ended); a refused
    # send typed nothing: its action only, no failed hand-off
    assert sends == [("send", "delivered", None), ("send", "done", "web 127.0.0.1"),
                     ("send", "delivered", None), ("send", "done", "cli"),
                     ("send", "refused", "web 127.0.0.1")], sends
    assert messages(blog) == ["hello from the page", "NEEDS_APPROVAL: now"]


@pytest.mark.anyio
@pytest.mark.parametrize(("action", "says"), [
    (Action("approve", "nope"), "no tile 'nope' in"),
    (Action("deny", " "), "deny: no target named"),
    (Action("send", "b", "  "), "send: the text is empty"),
    (Action("hold", "b->a"), "no route 'b->a' in"),
    (Action("resume", "ab"), "route ab is not held"),
    (Action("retry", "ab@1"), "no hand-off 'ab@1' in the journal"),
    (Action("reboot", "b"), "no action 'reboot'"),  # type: ignore[arg-type]
])
async def test_perform_refuses_bad_input_in_one_line_and_never_raises(action: Action, says: str,
                                                                      tmp_path: Path) -> None:
    config = write_routes(tmp_path, "unused", {"a": {"pane": "%0"}, "b": {"pane": "%1"}},
                          [{"name": "ab", "from": "a", "to": "b"}])
    result = await perform(action, config_path=config)
    assert not result.ok and says in result.message and "\n" not in result.message, result
    missing = await perform(action, config_path=tmp_path / "none.yaml")
    assert not missing.ok and "\n" not in missing.message


@pytest.mark.anyio
async def test_approve_on_a_pane_that_is_gone_says_so(tmp_path: Path, tmux_server: TmuxServer) -> None:
    shell_ready(tmux_server)
    config = write_routes(tmp_path, tmux_server.socket, {"b": {"pane": "title:nobody", "agent": "claude"}})
    result = await perform(Action("approve", "b"), config_path=config)
    assert not result.ok and result.message.startswith("tile b:") and "nothing typed" in result.message


# ---- the keys each adapter names, read from the real CLIs' recorded prompts -------------------------------


@pytest.mark.parametrize(("screen", "approve", "deny"), [
    ("claude-code-2.1.332/screens/screen_permission_prompt.txt", ["Down", "Enter"], ["Enter"]),  # ❯ No / Yes
    ("claude-code/screens/screen_permission_prompt.txt", ["Enter"], ["Down", "Down", "Enter"]),  # Yes…No
    ("codex/approval/screen_approval.txt", ["Enter"], ["Down", "Down", "Enter"]),
    ("opencode/screens/screen_permission_prompt.txt", ["Enter"], ["Right", "Right", "Enter"]),
    ("gemini-cli-0.61.0/screens/screen_11b_approval_prompt_bottom.txt", ["Enter"], ["Down", "Down", "Enter"]),
    ("gemini-cli-0.61.0/screens/screen_11_approval_prompt.ansi.txt", ["Enter"], ["Down", "Down", "Enter"]),
    ("gemini-cli-0.61.0/screens/screen_01_first_run_trust_dialog.txt", ["Enter"], ["Down", "Down", "Enter"]),
    ("copilot-1.0.102/screens/screen_09_approval_prompt.txt", ["Enter"], ["Down", "Down", "Enter"]),
    ("qwen-code-0.24.4/screens/permission.ansi", ["Enter"], ["Down", "Down", "Down", "Enter"]),
    # pi asks nothing before a tool; its question at start: trust for this session only, or not (ditto)
    ("pi-1.6.0/screens/trust_dialog.ansi.txt", ["Down", "Down", "Enter"], ["Down"] * 4 + ["Enter"]),
    ("pi-1.6.0/screens/trust_dialog_third.ansi.txt", ["Enter"], ["Down", "Down", "Enter"]),
    ("cline-3.0.65/screens/approval.ans", ["y"], ["n"]),  # [y] Approve   [n] Deny
])
def test_each_adapter_answers_its_agents_recorded_prompt(screen: str, approve: list[str],
                                                         deny: list[str]) -> None:
    folder = re.sub(r"-\d+(?:\.\d+)*$", "", screen.split("/")[0])  # the agent, without its version
    names = {"claude-code": "claude", "gemini-cli": "gemini", "qwen-code": "qwen"}  # pi is pi
    adapter = _adapter(names.get(folder, folder))
    text = (FIXTURES / screen).read_text()
    assert adapter.answer_keys(text, True) == approve
    assert adapter.answer_keys(text, False) == deny


@pytest.mark.parametrize("screen", [
    "claude-code-2.1.332/screens/screen_permission_declined.txt",
    "claude-code-2.1.332/screens/screen_done.txt",
    "codex/approval/screen_after_approval.txt", "opencode/screens/screen_done.txt",
    "gemini-cli-0.61.0/screens/screen_12_tool_approved_done.txt",
    "copilot-1.0.102/screens/screen_10_tool_approved_done.txt", "qwen-code-0.24.4/screens/after-tool.ansi",
    "pi-1.6.0/screens/idle.ansi.txt", "pi-0.73.1/screens/busy.ansi.txt",
    "cline-3.0.65/screens/idle.ans"])
def test_no_keys_when_no_prompt_shows(screen: str) -> None:
    for agent in ("claude", "codex", "opencode", "gemini", "copilot", "qwen", "pi", "cline", "demo",
                  "terminal"):
        assert _adapter(agent).answer_keys((FIXTURES / screen).read_text(), True) is None, agent


def _adapter(agent: str) -> AgentAdapter:
    ctx = EngineContext(name="t", tile=Tile(pane="%0", agent=agent), tmux=Tmux(socket_name="unused"))
    return make_adapter(load_registries().agents.get(agent), ctx)


def test_opencode_reads_which_button_is_selected_from_its_colours() -> None:
    """The selected button is drawn only in colour: moved to "Allow always", approve goes Left."""
    from plugins.opencode.screen import permission_answer

    text = (FIXTURES / "opencode/screens/screen_permission_prompt.txt").read_text()
    e = "\x1b"
    moved = text.replace(
        f"{e}[48;5;215m {e}[38;5;232mAllow once{e}[38;5;15m {e}[48;5;234m  {e}[38;5;8mAllow always",
        f"{e}[38;5;8mAllow once  {e}[48;5;215m {e}[38;5;232mAllow always{e}[38;5;15m {e}[48;5;234m ")
    assert moved != text
    assert permission_answer(moved, True) == ["Left", "Enter"]
    assert permission_answer(moved, False) == ["Right", "Enter"]


def test_history_follow_shows_actions_as_they_are_recorded(tmp_path: Path) -> None:
    """``history --follow`` prints a person's actions beside the hand-offs: the backlog's, then each new
    one (before, only ``baton history`` without ``--follow`` showed them)."""
    config = write_config(tmp_path / "routes.yaml", "unused", {"a": {"pane": "%1", "agent": "shell"},
                                                                "b": {"pane": "%2", "agent": "shell"}},
                          [{"name": "ab", "from": "a", "to": "b"}])
    assert baton("hold", "ab", "-c", str(config)).status == 0
    with following_history("-n", "5", into=tmp_path / "follow.jsonl") as printed:
        wait_for(lambda: len(printed()) == 1, what="the backlog: the hold")
        assert baton("resume", "ab", "-c", str(config)).status == 0
        wait_for(lambda: [(r["route"], r["state"]) for r in printed()][-1] == ("resume", "done"),
                 what="the resume followed to its outcome")
    rows = printed()  # the resume may show as "started" first, when a look fell between its two writes
    assert [(r["route"], r["state"]) for r in rows if r["state"] != "started"] == [
        ("hold", "done"), ("resume", "done")], rows
    assert all(r["kind"] == "action" and r["origin"] == "cli" for r in rows), rows
    assert "route ab resumed" in rows[-1]["note"], rows


@pytest.mark.parametrize("args", [("approve", "b"), ("hold", "a->b"), ("resume", "a->b")])
def test_an_action_for_another_host_with_no_bus_says_so_at_once(tmp_path: Path, args: tuple[str, str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A tile on another host, and no bus to reach it: one line, exit 1, nothing sent (it used to spin in
    the NATS client for good, deaf to Ctrl-C)."""
    monkeypatch.delenv("BATON_BUS_URL", raising=False)
    config = write_config(tmp_path / "routes.yaml", f"baton-nobus-{tmp_path.name}",
                          {"a": {"pane": "%1", "agent": "shell"},
                           "b": {"pane": "%2", "agent": "demo", "host": "elsewhere"}},
                          [{"from": "a", "to": "b"}])
    done = baton("-c", str(config), *args, timeout=30)
    assert done.status == 1, done
    assert "is for host elsewhere" in done.err and "names no bus" in done.err and "nothing sent" in done.err
