"""The state proof's checker (tests/support/state_proof.py) on made-up timelines: it flags a false idle while
the model streams, a false waiting and a prompt shown as working, forgives a board up to a second late, and
measures the delay to show each state."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.loopback import StreamLog
from tests.support.state_proof import Sample, Screen, StateProof
from tests.support.tmux import TmuxServer

T0 = 1000.0


def proof(tmp_path: Path) -> StateProof:
    screen = Screen(dialog=lambda s: False, busy=lambda s: False, ready=lambda s: True)
    made = StateProof("demo", TmuxServer(tmp_path), "%1", screen, tmp_path / "routes.yaml")
    made.phases = [(T0, "start")]
    # the screen: idle from 0 s, the permission prompt from 6 s to 8 s, idle again from 9 s
    made.seen = [(T0, "idle"), (T0 + 6, "waiting"), (T0 + 8, None), (T0 + 9, "idle")]
    made.keys = [(T0 + 1.9, "Enter")]
    return made


def board(*states: tuple[float, str]) -> list[Sample]:
    return [Sample(T0 + t, T0 + t + 0.05, state, None, "status") for t, state in states]


STREAM = [StreamLog(received=T0 + 2, first_chunk=T0 + 2.1, ended=T0 + 5)]  # the model answers 2 s → 5 s


def test_a_true_board_has_no_contradictions_and_its_delays_are_measured(tmp_path: Path) -> None:
    made = proof(tmp_path)
    made.samples = board((0.2, "idle"), (1.95, "working"), (3, "working"), (5.5, "working"), (5.9, "idle"),
                         (6.3, "waiting: permission prompt"), (7.5, "waiting"), (8.5, "working"),
                         (9.4, "idle"), (12, "idle"))
    verdict = made.check(STREAM)
    assert verdict.contradictions == []
    delays = verdict.delays()
    assert delays["start: working"] == 0.0  # shown by a look from 1.95 s to 2.0 s, the model at 2 s: at once
    assert round(delays["start: waiting"] or 0, 2) == 0.35 and round(delays["start: idle"] or 0, 2) == 0.45
    assert "0 contradictions in 10 samples" in verdict.line()


def test_false_idle_false_waiting_and_a_prompt_shown_as_working_are_contradictions(tmp_path: Path) -> None:
    made = proof(tmp_path)
    made.samples = board((0.2, "idle"), (3.5, "idle"), (4, "waiting: dialog open"), (7.2, "working"),
                         (12, "idle"))
    found = made.check(STREAM).contradictions
    assert len(found) == 3, found
    assert "'idle'" in found[0] and "'waiting: dialog open'" in found[1] and "'working'" in found[2]


def test_a_state_never_shown_fails_the_proof(tmp_path: Path) -> None:
    made = proof(tmp_path)
    made.samples = board((0.2, "idle"), (3, "working"), (9.5, "idle"), (12, "idle"))
    verdict = made.check(STREAM)
    assert verdict.delays()["start: waiting"] is None
    try:
        verdict.assert_true()
    except AssertionError as exc:
        assert "never shown: start: waiting" in str(exc)
    else:
        raise AssertionError("a state never shown passed")
