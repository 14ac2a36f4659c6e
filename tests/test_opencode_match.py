"""Which session is a pane's: start times, the prompt batonpass typed, the screen, and peers in one folder."""

from __future__ import annotations

from pathlib import Path

from plugins.opencode.resolve import Claim, OpenCodeProcess, choose_session, same_prompt
from plugins.opencode.turns import SessionRow

T0 = 1_800_000_000_000  # ms


def proc(started_ms: int, *argv: str) -> OpenCodeProcess:
    return OpenCodeProcess(pid=1, start_ticks=1, started_ms=started_ms, cwd="/w", store=Path("/s.db"),
                           argv=("opencode", *argv))


def ses(sid: str, created: int, updated: int, *prompts: str) -> SessionRow:
    return SessionRow(id=sid, directory="/w", title="t", created_ms=created, updated_ms=updated,
                      recent_prompts=prompts, newest_user=f"msg_{sid}" if prompts else None)


def test_one_pane_takes_the_newest_session_it_created() -> None:
    me = proc(T0)
    old = ses("old", T0 - 60_000, T0 + 90_000, "from yesterday")
    first, second = ses("a", T0 + 5_000, T0 + 20_000, "p1"), ses("b", T0 + 30_000, T0 + 40_000, "p2")
    match = choose_session([old, second, first], me=me)
    assert (match.session.id, match.rule) == ("b", "start")
    assert choose_session([old], me=me).session is None  # created before the process: another run's
    assert "first prompt" in choose_session([], me=me).detail


def test_a_session_named_on_the_command_line_or_continued_is_eligible() -> None:
    old, older = ses("old", T0 - 60_000, T0 - 1_000, "x"), ses("older", T0 - 90_000, T0 - 50_000, "y")
    assert choose_session([old, older], me=proc(T0, "-s", "older")).session.id == "older"
    assert choose_session([old, older], me=proc(T0, "--session=older")).session.id == "older"
    assert choose_session([old, older], me=proc(T0, "--continue")).session.id == "old"


def test_the_prompt_batonpass_typed_decides_between_two_panes_in_one_folder() -> None:
    a, b = proc(T0), proc(T0 + 10_000)
    sa = ses("sa", T0 + 20_000, T0 + 30_000, "write the parser")
    sb = ses("sb", T0 + 25_000, T0 + 31_000, "review the parser please")
    match_b = choose_session([sb, sa], me=b, peers=[Claim(T0, "/w")], last_prompt="review the parser please")
    assert (match_b.session.id, match_b.rule) == ("sb", "prompt")
    # a's prompt came from a person: b's claim by prompt leaves sa, and the screen confirms it
    match_a = choose_session([sb, sa], me=a, peers=[Claim(T0 + 10_000, "/w", "sb", "prompt")],
                             screen="┃  write the parser\n   ▣  Build · Fake · 1.2s")
    assert (match_a.session.id, match_a.rule) == ("sa", "screen")


def test_start_times_tell_two_panes_apart_until_both_are_ambiguous() -> None:
    a, b = proc(T0), proc(T0 + 10_000)
    sa = ses("sa", T0 + 5_000, T0 + 50_000, "mine, before b existed")
    sb = ses("sb", T0 + 20_000, T0 + 40_000, "whose?")
    # a: sa was created before b started, so it cannot be b's
    match_a = choose_session([sa, sb], me=a, peers=[Claim(T0 + 10_000, "/w")])
    assert (match_a.session.id, match_a.rule) == ("sa", "start")
    # b: sa is too old to be b's; sb could be a's or b's — no evidence, no guess
    assert choose_session([sa, sb], me=b, peers=[Claim(T0, "/w")]).session is None
    # ... until b's screen shows sb's prompt, or b keeps what it matched before
    assert choose_session([sa, sb], me=b, peers=[Claim(T0, "/w")], screen="whose?").session.id == "sb"
    assert choose_session([sa, sb], me=b, peers=[Claim(T0, "/w")], previous="sb").rule == "kept"


def test_prompts_compare_without_whitespace_noise() -> None:
    assert same_prompt("review  this\nplease ", "review this please")
    assert same_prompt("Context: x\n\nreview this change carefully now", "review this change carefully now")
    assert not same_prompt("something else", "review this")
    assert not same_prompt("anything", "")


def test_a_process_names_its_folder_and_how_far_back_its_sessions_go() -> None:
    p = OpenCodeProcess(pid=1, start_ticks=1, started_ms=T0, cwd="/real/web", store=None, argv=("opencode",),
                        pwd="/link/web")
    assert p.directories == ("/real/web", "/link/web")
    assert p.since_ms == T0 - 250
    assert proc(T0, "--continue").since_ms == 0 and proc(T0, "-s", "ses_x").since_ms == 0


def test_the_typed_prompt_decides_only_while_it_is_the_sessions_newest() -> None:
    """After batonpass's prompt the person typed on, then started a new session (/new): the new one is
    followed."""
    s1 = ses("s1", T0 + 5_000, T0 + 20_000, "a person's follow-up", "the prompt batonpass typed")
    s2 = ses("s2", T0 + 30_000, T0 + 40_000, "in the new session")
    match = choose_session([s2, s1], me=proc(T0), last_prompt="the prompt batonpass typed")
    assert (match.session.id, match.rule) == ("s2", "start")
