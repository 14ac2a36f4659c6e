"""``baton hooks install --codex``: notify in config.toml, the user's config and notify program kept."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from pipeline.cli import main as baton
from pipeline.spool import read_records
from plugins.codex.hooks import install_notify, toml_array
from tests.support.paths import FIXTURES

HOOK = [sys.executable, "-m", "pipeline.spool", "codex"]
RECORDED = FIXTURES / "codex" / "codex_home" / "config.toml"


def install(path: Path) -> str:
    return install_notify(path, HOOK)


def test_a_fresh_codex_home_gets_a_config(tmp_path: Path) -> None:
    path = tmp_path / "codex" / "config.toml"
    assert "notify runs batonpass" in install(path)
    assert tomllib.loads(path.read_text()) == {"notify": HOOK}
    assert path.stat().st_mode & 0o777 == 0o600


def test_the_recorded_config_is_chained_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(RECORDED.read_text())
    path.chmod(0o640)
    before = tomllib.loads(path.read_text())
    message = install(path)
    assert "then your previous program (python3 /home/dev/tools/notify_logger.py)" in message
    after = tomllib.loads(path.read_text())
    assert after["notify"] == HOOK + ["--then", "python3", "/home/dev/tools/notify_logger.py"]
    assert {k: v for k, v in after.items() if k != "notify"} == {
        k: v for k, v in before.items() if k != "notify"
    }
    # only the notify line changed, in place
    old_lines, new_lines = RECORDED.read_text().splitlines(), path.read_text().splitlines()
    assert [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b] == [5]
    assert path.stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "config.toml.batonpass.bak").read_text() == RECORDED.read_text()


def test_installing_twice_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(RECORDED.read_text())
    install(path)
    once = path.read_bytes()
    assert "already runs batonpass" in install(path)
    assert path.read_bytes() == once
    # another Python (a new venv) replaces batonpass's command and keeps the chain
    other = ["/opt/py/bin/python3", "-m", "pipeline.spool", "codex"]
    install_notify(path, other)
    assert tomllib.loads(path.read_text())["notify"] == other + [
        "--then",
        "python3",
        "/home/dev/tools/notify_logger.py",
    ]


TRICKY = '''# my codex settings
model = "o4"   # the model
notify = [
  "notify-send",   # desktop
  "Codex [done]", # brackets in a string
]  # trailing comment
title = """
[not a table]
notify = ["fake"]
"""

# providers
[model_providers.x]
name = 'x # not a comment'
arr = [
  [1, 2],
  [3],
]
'''


def test_a_multiline_notify_among_tricky_toml(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(TRICKY)
    install(path)
    text = path.read_text()
    data = tomllib.loads(text)
    assert data["notify"] == HOOK + ["--then", "notify-send", "Codex [done]"]
    assert data["title"] == '[not a table]\nnotify = ["fake"]\n' and data["model_providers"]["x"]["arr"] == [
        [1, 2],
        [3],
    ]
    assert (
        '# my codex settings\nmodel = "o4"   # the model\nnotify = [' in text
        and "]  # trailing comment" not in text
    )
    assert text.count("# trailing comment") == 1 and text.endswith(TRICKY[TRICKY.index('title = """'):])


def test_no_notify_yet_goes_above_the_first_table(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(TRICKY.replace(TRICKY[TRICKY.index("notify = ["):TRICKY.index('title = """')], ""))
    install(path)
    text = path.read_text()
    assert tomllib.loads(text)["notify"] == HOOK
    assert text.index("notify = ") < text.index("# providers") < text.index("[model_providers.x]")


def test_bad_configs_are_left_alone_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    for bad, message in (
        ('model = "unterminated\n', "not valid TOML"),
        ('notify = "notify-send"\n', "not a list"),
    ):
        path.write_text(bad)
        with pytest.raises(ValueError, match=message):
            install(path)
        assert path.read_text() == bad


def test_odd_characters_survive_the_round_trip(tmp_path: Path) -> None:
    items = ['quote " back\\slash', "tab\tnew\nline", "émoji 🎉", "del\x7f"]
    assert tomllib.loads(f"x = {toml_array(items)}")["x"] == items


def test_baton_hooks_install_codex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path))
    (tmp_path / "config.toml").write_text(RECORDED.read_text())
    assert baton(["hooks", "install", "--codex"]) == 0
    assert "notify now runs batonpass" in capsys.readouterr().out
    notify = tomllib.loads((tmp_path / "config.toml").read_text())["notify"]
    assert notify[1:4] == ["-m", "pipeline.spool", "codex"] and notify[-3:] == ["--then", "python3",
                                                                             "/home/dev/tools/notify_logger.py"]


def test_the_chained_program_gets_the_same_argument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What Codex runs: the installed notify argv plus one JSON argument."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    logger = tmp_path / "logger.py"
    logger.write_text("import json, sys\nopen(sys.argv[1], 'a').write(json.dumps(sys.argv[2:]) + '\\n')\n")
    out = tmp_path / "previous.jsonl"
    payload = json.loads((FIXTURES / "codex" / "hooks" / "notify.jsonl").read_text().splitlines()[1])["argv"][
        -1
    ]
    argv = [*HOOK, "--then", sys.executable, str(logger), str(out), payload]
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=30, cwd=Path(__file__).parent.parent
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text()) == [payload]
    [record] = read_records(tmp_path / "state" / "batonpass" / "spool")
    assert record.agent == "codex" and record.payload == json.loads(payload)


def test_a_missing_chained_program_does_not_fail_the_hook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    result = subprocess.run([*HOOK, "--then", str(tmp_path / "gone"), '{"type": "agent-turn-complete"}'],
                            capture_output=True, text=True, timeout=30, cwd=Path(__file__).parent.parent)
    assert result.returncode == 0 and "cannot run the chained program" in result.stderr
    assert len(read_records(tmp_path / "state" / "batonpass" / "spool")) == 1
