"""``baton preview ROUTE``: the prompt a route's transform would send, for a given answer or the source
tile's last one — the model's prompt when a key is set, the exact request with ``--dry-run`` or no key."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from pipeline.cli import main
from tests.fakes.anthropic_api import FakeAnthropicAPI, Reply, serving
from tests.support.cli import baton
from tests.support.polling import wait_for

ANSWER = "I changed src/auth/tokens.py: `refresh()` now refuses expired tokens.\n"
MODEL_PROMPT = "Review `refresh()` in src/auth/tokens.py for expiry handling."

ROUTES = """\
version: 1
{tmux}
tiles:
  coder: {{pane: "{coder}", agent: {agent}, description: writes the code, cwd: /src/app}}
  reviewer: {{pane: "%2", agent: codex, description: reviews each change}}
routes:
  - name: review
    from: coder
    to: reviewer
    transform: {{type: ai-routing, instructions: Ask for a security review., on_error: {on_error}}}
  - from: reviewer
    to: coder
    transform: {{type: template, template: "The reviewer ({{source}}) says: {{response}}"}}
"""


@pytest.fixture
def anthropic_api(monkeypatch: pytest.MonkeyPatch):
    with serving(monkeypatch) as api:
        yield api


def write_routes(tmp_path: Path, *, coder: str = "%1", agent: str = "claude", on_error: str = "raw",
                 socket: str | None = None) -> Path:
    path = tmp_path / "routes.yaml"
    tmux = f"tmux: {{socket_name: {socket}}}" if socket else ""
    path.write_text(ROUTES.format(tmux=tmux, coder=coder, agent=agent, on_error=on_error))
    return path


def preview(capsys, *args: str) -> tuple[int, str, str]:
    status = main(["preview", *args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def answer_file(tmp_path: Path) -> Path:
    path = tmp_path / "answer.md"
    path.write_text(ANSWER)
    return path


def test_with_a_key_it_prints_the_models_prompt(
    capsys, tmp_path, answer_file, anthropic_api: FakeAnthropicAPI
):
    anthropic_api.default = Reply(text=MODEL_PROMPT)
    status, out, err = preview(
        capsys, "review", "-c", str(write_routes(tmp_path)), "--input", str(answer_file)
    )
    assert (status, out) == (0, MODEL_PROMPT + "\n")
    [request] = anthropic_api.messages
    assert f"<answer>\n{ANSWER.strip()}\n</answer>" in request.user_text
    assert "Ask for a security review." in request.user_text


def test_without_a_key_it_shows_the_raw_answer_run_would_hand_on(capsys, tmp_path, answer_file, anthropic_api,
                                                                  monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    status, out, err = preview(
        capsys, "review", "-c", str(write_routes(tmp_path)), "--input", str(answer_file)
    )
    assert (status, out) == (0, ANSWER.strip() + "\n")  # what `baton check` says the route does without a key
    assert "fell back to the raw answer: ANTHROPIC_API_KEY is not set" in err
    assert anthropic_api.requests == []


def test_dry_run_shows_the_request_without_calling_the_model(capsys, tmp_path, anthropic_api, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(ANSWER))
    status, out, err = preview(
        capsys, "review", "-c", str(write_routes(tmp_path)), "--input", "-", "--dry-run"
    )
    assert status == 0 and "--- user ---" in out and ANSWER.strip() in out
    assert "--dry-run: this is the request" in err
    assert anthropic_api.requests == []


def test_a_transform_without_a_model_is_simply_applied(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("LGTM"))
    status, out, _ = preview(capsys, "reviewer->coder", "-c", str(write_routes(tmp_path)), "--input", "-")
    assert (status, out) == (0, "The reviewer (reviewer) says: LGTM\n")


def test_a_failed_call_shows_the_fallback_and_says_why(capsys, tmp_path, answer_file, anthropic_api):
    anthropic_api.default = Reply(status=400)
    status, out, err = preview(
        capsys, "review", "-c", str(write_routes(tmp_path)), "--input", str(answer_file)
    )
    assert (status, out) == (0, ANSWER)
    assert "ai-routing fell back to the raw answer: the API answered HTTP 400" in err


def test_a_skipped_hand_off_exits_1(capsys, tmp_path, answer_file, anthropic_api):
    anthropic_api.default = Reply(empty=True)
    routes = write_routes(tmp_path, on_error="skip")
    status, out, err = preview(capsys, "review", "-c", str(routes), "--input", str(answer_file))
    assert (status, out) == (1, "")
    assert "route review would not hand this off: ai-routing could not run" in err


def test_unknown_route_and_unreadable_input_are_clear_errors(capsys, tmp_path):
    routes = str(write_routes(tmp_path))
    status, _, err = preview(capsys, "nope", "-c", routes, "--input", routes)
    assert status == 1 and "no route 'nope'" in err and "routes: review, reviewer->coder" in err
    status, _, err = preview(capsys, "review", "-c", routes, "--input", str(tmp_path / "missing.md"))
    assert status == 1 and "cannot read --input" in err


@pytest.mark.tmux
def test_without_input_it_reads_the_source_tiles_last_answer(capsys, tmp_path, tmux_server, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    shell = tmux_server.new_pane()
    tmux_server.type(shell, "printf 'FAIL %s\\n' tests/test_app.py::test_total")
    wait_for(
        lambda: "FAIL tests/test_app.py::test_total" in tmux_server.capture(shell), what="the shell's output"
    )
    routes = write_routes(tmp_path, coder=shell, agent="shell", socket=tmux_server.socket)
    status, out, err = preview(capsys, "review", "-c", str(routes))
    # without a key the route hands on the raw answer: the last command's output, as `run` cuts it
    assert (status, out) == (0, "FAIL tests/test_app.py::test_total\n"), err
    assert "the answer: tile coder's last one, from its terminal" in err


@pytest.mark.tmux
def test_an_enter_on_an_empty_line_after_the_command_stays_out_of_the_answer(capsys, tmp_path, tmux_server,
                                                                             monkeypatch):
    """CI once saw the answer end in a stray prompt: the shell had drawn a second, empty prompt line."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    shell = tmux_server.new_pane()
    tmux_server.type(shell, "echo done-here")
    wait_for(lambda: "\ndone-here" in tmux_server.capture(shell), what="the shell's output")
    tmux_server.type(shell, "")
    wait_for(lambda: [ln.strip() for ln in tmux_server.capture(shell).strip().split("\n")][-3:]
             == ["done-here", "$", "$"], what="an empty prompt")
    routes = write_routes(tmp_path, coder=shell, agent="shell", socket=tmux_server.socket)
    status, out, err = preview(capsys, "review", "-c", str(routes))
    assert (status, out) == (0, "done-here\n"), err


@pytest.mark.tmux
def test_a_source_that_cannot_be_read_says_so(capsys, tmp_path, tmux_server):
    tmux_server.new_pane()
    routes = write_routes(tmp_path, coder="%999", agent="shell", socket=tmux_server.socket)
    status, out, err = preview(capsys, "review", "-c", str(routes))
    assert (status, out) == (1, "")
    assert "cannot read the last answer of tile coder" in err and "--input FILE or --input -" in err


# ---- issue 34 item 6: `baton preview` run as a person runs it ----------------------------------------------

NEWCOMER_ROUTES = """\
version: 1
tiles:
  sh: {pane: "%991", agent: shell}
  rev: {pane: "%992", agent: claude}
routes:
  - {name: review, from: sh, to: rev, transform: {type: summary}}
  - {name: plain, from: sh, to: rev}
"""


def test_echos_line_end_is_no_control_character_and_the_missing_key_is_said_once(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    (tmp_path / "routes.yaml").write_text(NEWCOMER_ROUTES)
    plain = baton("preview", "plain", "--input", "-", input="ready for review\n", cwd=tmp_path)
    assert (plain.status, plain.out, plain.err) == (0, "ready for review\n", "")
    review = baton("preview", "review", "--input", "-", input="ready for review\n", cwd=tmp_path)
    assert (review.status, review.out) == (0, "ready for review\n")
    assert review.error_lines == [
        "baton preview: summary fell back to the raw answer: ANTHROPIC_API_KEY is not set"], review.err


def test_the_model_call_logs_no_http_lines_without_verbose(tmp_path, anthropic_api):
    anthropic_api.default = Reply(text="A short summary.")
    (tmp_path / "routes.yaml").write_text(NEWCOMER_ROUTES)
    quiet = baton("preview", "review", "--input", "-", input="ready for review\n", cwd=tmp_path)
    assert (quiet.status, quiet.out, quiet.err) == (0, "A short summary.\n", ""), quiet
    loud = baton("-v", "preview", "review", "--input", "-", input="ready for review\n", cwd=tmp_path)
    assert loud.status == 0 and "HTTP Request: POST" in loud.err, loud


def test_a_tile_that_cannot_be_read_is_named_without_stray_quotes(tmp_path):
    (tmp_path / "routes.yaml").write_text(NEWCOMER_ROUTES)
    result = baton("-L", f"baton-no-server-{tmp_path.name}", "preview", "plain", cwd=tmp_path)
    line = result.one_line_error(1, "cannot read the last answer of tile sh ", "--input FILE or --input -")
    assert "'sh''s" not in line
