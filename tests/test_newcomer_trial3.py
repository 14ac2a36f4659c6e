"""The third newcomer trial (issue #34's last ask): every command tried again from a fresh clone as a new user
would, with right and wrong input; what did not do what its help and the README say, run here as a person
runs it — the real ``baton`` command, real tmux panes, a real nats-server — with the exact outcome checked."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

import anyio
import pytest

from tests.support.bus import NatsServer
from tests.support.cli import (
    BATON,
    Result,
    baton,
    baton_env,
    following_history,
    shell_ready,
    write_routes,
)
from tests.support.codex import CodexHome, StandIns
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

#: ``baton`` as a person runs it who installed batonpass without the ``bus`` extra: ``import nats`` fails
#: exactly as it does when the package is not there (None in sys.modules: ModuleNotFoundError, name "nats")
WITHOUT_NATS = [sys.executable, "-c", "import sys; sys.modules['nats'] = None; "
                "from pipeline.cli import main; sys.exit(main())"]
NO_CLIENT = "needs the NATS client: pip install 'batonpass[bus]'"


def _without_nats(*args: str, cwd: Path) -> Result:
    done = subprocess.run([*WITHOUT_NATS, *args], cwd=cwd, capture_output=True, stdin=subprocess.DEVNULL,
                          env=baton_env(None), timeout=60)
    return Result(done.returncode, done.stdout.decode(), done.stderr.decode())


@pytest.mark.tmux
def test_one_shot_commands_print_no_adapter_log_line(tmux_server: TmuxServer, tmp_path: Path) -> None:
    """``status``, ``resolve`` and ``send`` on a Codex tile: the adapter's "codex rollout … (rule: open
    fd)" is ``run``'s news (and one of resolve's steps), not a stray line on standard error; -v shows it."""
    home = CodexHome(tmp_path / "codex")
    rollout = home.rollout(time.time() - 60, tmp_path, prompts=("hello",))
    stand_ins = StandIns(tmp_path)
    codex = stand_ins.bin / "codex"
    script = f"exec 3<{rollout}; sleep 600; true"
    pane = tmux_server.new_pane(f"bash -c {shlex.quote(f'{codex} -c {shlex.quote(script)}; true')}",
                                env={"CODEX_HOME": str(home.root)})
    config = write_routes(tmp_path, tmux_server.socket, {"cx": {"pane": pane, "agent": "codex"}})
    try:
        wait_for(lambda: "rule: open fd" in baton("-c", str(config), "resolve", "cx").out,
                 what="the stand-in's rollout found")
        status = baton("-c", str(config), "status")
        assert status.status == 0 and "answer to hello" in status.out, status
        assert status.err == "", status.err
        resolved = baton("-c", str(config), "resolve", "cx")
        assert resolved.status == 0 and resolved.err == "", resolved
        sent = baton("-c", str(config), "send", "cx", "hi")
        assert "Traceback" not in sent.err and "codex rollout" not in sent.err, sent
        assert "codex rollout" in baton("-c", str(config), "-v", "status").err
    finally:
        stand_ins.stop()


def test_without_the_bus_extra_each_bus_command_says_how_to_install_it(tmp_path: Path) -> None:
    """Installed as the README's first line does (no ``[bus]`` extra), a routes.yaml with a bus: the
    commands that need it say in one line to install the extra, never a traceback."""
    (tmp_path / "routes.yaml").write_text(
        'version: 1\ntmux: {socket_name: nobody-runs-this}\ntiles:\n  a: {pane: "%1", agent: shell}\n'
        '  far: {pane: "%2", agent: shell, host: otherbox}\nroutes:\n  - {from: a, to: far}\n'
        'settings:\n  bus: {servers: ["nats://127.0.0.1:9"]}\n')
    for args in (("status", "--all-hosts"), ("history", "--all-hosts")):
        _without_nats(*args, cwd=tmp_path).one_line_error(1, f"baton {args[0]}: the bus", NO_CLIENT)
    run = _without_nats("run", "--dry-run", cwd=tmp_path)  # its tiles' lines first: no tmux server here
    assert run.status == 1 and "Traceback" not in run.err, run
    assert run.error_lines[-1].startswith("baton run: the bus") and NO_CLIENT in run.error_lines[-1], run.err
    _without_nats("approve", "far", cwd=tmp_path).one_line_error(
        1, "baton approve: approve far is for host otherbox", NO_CLIENT)


def test_all_hosts_with_nothing_listening_says_so_at_once(tmp_path: Path) -> None:
    """A bus address where nothing listens is no wait for an answer: ``status``/``history --all-hosts``
    say it cannot be reached and why, and how to start one."""
    (tmp_path / "routes.yaml").write_text('version: 1\ntiles:\n  a: {pane: "%1", agent: shell}\nroutes: []\n')
    env = {"BATON_BUS_URL": "nats://127.0.0.1:9"}
    for command in ("status", "history"):
        line = baton(command, "--all-hosts", cwd=tmp_path, env=env).one_line_error(
            1, f"baton {command} --all-hosts: the bus at nats://127.0.0.1:9 cannot be reached",
            "ConnectionRefusedError", "baton bus")
        assert "did not answer" not in line


async def _streams(url: str) -> list[str]:
    import nats

    nc = await nats.connect(servers=[url])
    try:
        return [info.config.name for info in await nc.jetstream().streams_info()]
    finally:
        await nc.close()


@pytest.mark.tmux
def test_the_all_hosts_board_is_a_reader(tmux_server: TmuxServer, tmp_path: Path,
                                         nats: NatsServer) -> None:  # noqa: F811
    """``status --watch --all-hosts`` hands nothing off: it makes no stream on the bus, and a bus that goes
    away is said on its last line without "hand-offs are kept and retried"."""
    config = tmp_path / "routes.yaml"
    config.write_text('version: 1\ntiles:\n  a: {pane: "%1", agent: shell, host: alpha}\nroutes: []\n')
    script = shlex.join([*BATON, "-c", str(config), "status", "--watch", "--all-hosts"]) + "; sleep 60"
    pane = tmux_server.new_pane(f"bash --norc --noprofile -c {shlex.quote(script)}", width=100, height=24,
                                env={"BATON_BUS_URL": nats.url, "NO_COLOR": "1"})

    def screen() -> str:
        return tmux_server.capture(pane)

    wait_for(lambda: "all hosts" in screen(), 20, what="the board drawn")
    assert "BATON" not in anyio.run(_streams, nats.url)  # the hand-offs' stream: a daemon's, not a reader's
    nats.stop()
    wait_for(lambda: "the bus did not answer" in screen(), 20, what="the outage said")
    assert "kept and retried" not in screen(), screen()
    tmux_server.run("send-keys", "-t", pane, "q")


@pytest.mark.tmux
def test_history_follow_shows_a_send_in_progress_as_typing(tmux_server: TmuxServer, tmp_path: Path) -> None:
    """``history -f`` beside a ``send``: the row the send writes before it types says it is typing, not
    that it "stopped before it knew" (true only of a row left so by a crash)."""
    pane = shell_ready(tmux_server)
    config = write_routes(tmp_path, tmux_server.socket, {"sh": {"pane": pane, "agent": "shell"}})
    assert baton("-c", str(config), "send", "sh", "true").status == 0  # the journal is there
    with following_history("-n", "1", into=tmp_path / "follow.jsonl") as printed:
        wait_for(lambda: len(printed()) == 1, what="the follower's first row")
        assert baton("-c", str(config), "send", "sh", "true").status == 0

        first = printed()[0]["key"]  # the first send's last line (its hand-off, or its action's outcome)

        def handoffs() -> list[dict]:  # the second send's hand-off (its action has lines of its own)
            return [r for r in printed() if "kind" not in r and r["key"] != first]

        # a shell's turn is its command: `true` started, so the send ends delivered (#39 item 13)
        wait_for(lambda: handoffs() and handoffs()[-1]["state"] == "delivered",
                 what="the second send followed to its end")
    rows = handoffs()
    # a follower's look between the send's two writes sees the row it writes before it types (not always:
    # the send may be done between two looks); whenever it does, that row says it is typing
    typing = [r for r in rows if r["state"] != "delivered"]
    assert all(r["note"] == ("baton send is typing this; left so, it stopped before it knew whether the "
                             "agent took it") for r in typing), rows
    assert not any(r["note"].startswith("baton send was typing") for r in rows), rows


def test_history_names_a_tile_or_route_routes_yaml_does_not_have(tmp_path: Path) -> None:
    """A misspelt ``--tile``/``--route``: nothing matches (exit 0, the journal may hold an older
    routes.yaml's names), and one line on standard error names the tiles or routes routes.yaml has."""
    (tmp_path / "routes.yaml").write_text('version: 1\ntiles:\n  coder: {pane: "%1", agent: shell}\n'
                                          '  reviewer: {pane: "%2", agent: shell}\n'
                                          'routes:\n  - {name: review, from: coder, to: reviewer}\n')
    baton("history", "--tile", "codr", cwd=tmp_path).one_line_error(
        0, "baton history: routes.yaml has no tile 'codr' (tiles: coder, reviewer)")
    baton("history", "--route", "reveiw", cwd=tmp_path).one_line_error(
        0, "baton history: routes.yaml has no route 'reveiw' (routes: review)")
    for known in (("--tile", "coder"), ("--route", "review"), ("--route", "coder->reviewer")):
        assert baton("history", *known, cwd=tmp_path).err == ""


def test_empty_input_file_and_the_hooks_help(tmp_path: Path) -> None:
    """``preview --input ''`` is a usage error naming the option (not "cannot read --input : No such
    file"); ``hooks install -h`` names every built-in hook the README lists."""
    (tmp_path / "routes.yaml").write_text('version: 1\ntiles:\n  a: {pane: "%1", agent: shell}\n'
                                          '  b: {pane: "%2", agent: shell}\nroutes:\n  - {from: a, to: b}\n')
    baton("preview", "a->b", "--input", "", cwd=tmp_path).one_line_error(2, "--input is empty")
    help_text = " ".join(baton("hooks", "install", "-h").out.split())
    for hook in ("Claude Code's Stop hook", "Codex's notify", "Gemini's AfterAgent", "Copilot's agentStop"):
        assert hook in help_text, help_text


def test_bus_on_a_port_in_use_says_so_in_one_line(tmp_path: Path, nats: NatsServer) -> None:  # noqa: F811
    """A second ``baton bus`` on a busy port: one line naming the port and the way on, not the start-up
    line announcing a bus followed by nats-server's banner and its fatal error."""
    line = baton("bus", "--port", str(nats.port), cwd=tmp_path).one_line_error(
        1, f"baton bus: port {nats.port} on 127.0.0.1 is in use", "--port")
    assert "nats://" not in line
    baton("bus", "--listen", "nosuchhost.invalid", cwd=tmp_path).one_line_error(
        1, "baton bus: --listen nosuchhost.invalid:")


def test_an_empty_config_option_is_a_usage_error(tmp_path: Path) -> None:
    """``-c ''`` names no file: a usage error saying so, not "cannot read: Is a directory" about ``.``."""
    baton("check", "-c", "", cwd=tmp_path).one_line_error(2, "baton check: error: argument -c/--config: "
                                                              "-c is empty: name the file")
    baton("-c", "", "status", cwd=tmp_path).one_line_error(2, "-c is empty")


def test_disabling_a_built_in_says_only_third_party_plugins_are_blocked(tmp_path: Path) -> None:
    """``BATON_DISABLED_PLUGINS=codex``: ``baton plugins`` still lists codex (a built-in), so the warning
    must not leave "installed: (none)" as if codex were not there: it says the built-ins always load."""
    shown = baton("plugins", cwd=tmp_path, env={"BATON_DISABLED_PLUGINS": "codex"})
    line = shown.one_line_error(0, "BATON_DISABLED_PLUGINS names no installed plugin: codex",
                                "(it blocks third-party plugins; the built-ins always load)")
    assert "Traceback" not in line and "\nagent      codex " in shown.out


def test_demo_refuses_turns_too_quick_to_be_seen(tmp_path: Path) -> None:
    """``demo --work-s 0`` was accepted and then failed ("only 0 of 1 hand-offs") or hung: a turn over
    before batonpass sees it start is no turn an agent takes. The help's range starts at 0.1, and 0.1 runs."""
    baton("demo", "--work-s", "0", cwd=tmp_path).one_line_error(
        2, "argument --work-s: 0 is out of range (0.1 to 10.0)")
    assert "0.1 to 10 seconds" in " ".join(baton("demo", "-h").out.split())
    quick = baton("demo", "--handoffs", "2", "--work-s", "0.1", cwd=tmp_path, timeout=60)
    assert quick.status == 0 and "demo: 2 hand-offs in" in quick.out, quick


def test_a_misspelt_tile_with_no_tmux_server_is_named(tmp_path: Path) -> None:
    """``send``/``resolve`` of a word that is no tile, on a ``-L`` server nobody runs: the line names the
    tiles routes.yaml has as well as the missing server (a typo is likelier than a pane named so)."""
    socket = f"trial3-nobody-{uuid.uuid4().hex[:8]}"
    config = write_routes(tmp_path, socket, {"coder": {"pane": "work:0.0", "agent": "shell"}})
    for args in (("send", "codr", "hi"), ("resolve", "codr")):
        baton("-c", str(config), *args).one_line_error(
            1, f"baton {args[0]}: no tile 'codr' in {config} (tiles: coder), and no tmux server is running")
    # the tile's own name: the server is what is missing
    baton("-c", str(config), "send", "coder", "hi").one_line_error(
        1, "baton send: no tmux server is running at")
