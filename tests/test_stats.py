"""The stats recorder: rates computed once from round events, live and final; mode switches follow the rounds."""

from __future__ import annotations

import pytest

from engine.speculative.types import RoundResult
from engine.stats import DecodeTimes, GenerationStats, StatsRecorder


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rates_and_switches_from_round_events() -> None:
    clock = Clock()
    stats = GenerationStats(mode="auto")
    rec = StatsRecorder(stats, clock)
    clock.now += 0.5
    rec.first_token(DecodeTimes(0.4, 0.0))
    assert stats.ttft_s == pytest.approx(0.5)
    rounds = [
        RoundResult([7], "ar", verify_s=0.1, why="probe ar"),
        RoundResult([1, 2, 3], "sd", "jit", drafted=3, accepted=2, verify_s=0.2, wait_s=0.1, why="probe sd(K=3)"),
        RoundResult([4, 5], "ssd", "jit", drafted=3, accepted=1, hit=None, verify_s=0.2, wait_s=0.1),
        RoundResult([6, 7, 8, 9], "ssd", "cache", drafted=3, accepted=3, hit=True, verify_s=0.2),
        RoundResult([1], "ssd", "jit", drafted=3, accepted=0, hit=False, verify_s=0.2, wait_s=0.1),
    ]
    for rr in rounds:
        for _ in rr.tokens:
            clock.now += 0.1
            rec.token()
        rec.round(rr)
        assert stats.current_mode == rr.mode  # live: the latest round's step
    assert stats.rounds_by_mode == {"ar": 1, "sd": 1, "ssd": 3}
    assert stats.mode_switches == ["ar->sd (probe sd(K=3))", "sd->ssd"]
    assert (stats.drafted, stats.accepted) == (12, 6)
    assert stats.acceptance_rate == pytest.approx(0.5)
    assert stats.mean_accepted == pytest.approx(6 / 4)
    assert (stats.hits, stats.lookups, stats.hit_rate) == (1, 2, 0.5)
    assert stats.backup_uses == 2  # ssd rounds drafted by the backup (the forced first miss included)
    assert stats.new_tokens == 11
    assert stats.tokens_per_second == pytest.approx(11 / 1.6)
    assert stats.mean_verify_ms == pytest.approx(1000 * 0.9 / 5)
    clock.now += 0.4
    rec.finish(DecodeTimes(0.0, 0.0), DecodeTimes(1.0, 0.5), draft_on_this_thread=False)
    assert stats.seconds == pytest.approx(2.0)
    assert (stats.target_decode_s, stats.draft_decode_s) == (1.0, 0.5)
    # loop of 1.5 s: 0.6 s target decode after the first token, 0.3 s waiting for the draft
    assert stats.python_share == pytest.approx(1 - 0.9 / 1.5)


def test_a_pool_draft_is_the_loops_own_host_work_not_a_wait_for_the_draft() -> None:
    clock = Clock()
    stats = GenerationStats(mode="lookup")
    rec = StatsRecorder(stats, clock)
    rec.first_token(DecodeTimes())
    rec.round(RoundResult([1, 2], "lookup", "ngram", drafted=1, accepted=1, verify_s=0.09, wait_s=0.01))
    clock.now += 0.1
    rec.finish(DecodeTimes(), DecodeTimes(0.09, 0.0), draft_on_this_thread=False)
    assert stats.python_share == pytest.approx(0.1)  # the pool's 10 ms are Python on this thread
    assert stats.mean_draft_ms == pytest.approx(10.0)  # while the readout still shows the round's draft time


def test_a_mode_that_never_changes_reports_no_switch() -> None:
    stats = GenerationStats(mode="ar")
    rec = StatsRecorder(stats, Clock())
    for _ in range(3):
        rec.round(RoundResult([1], "ar", why="whatever"))
    assert stats.mode_switches == [] and stats.rounds_by_mode == {"ar": 3}
    assert stats.acceptance_rate is None and stats.hit_rate is None and stats.mean_accepted is None


def test_a_prompt_read_ahead_is_not_the_loops_decode_time_but_its_wait_is() -> None:
    # The draft read the prompt on its own thread; its 0.3 s decode ended after the first token. The loop then
    # waited 0.1 s for it, and an sd loop (the draft on this thread) decoded 0.5 s of target and 0.2 s of draft.
    clock, cpu = Clock(), Clock()
    stats = GenerationStats(mode="sd")
    rec = StatsRecorder(stats, clock, cpu)
    rec.first_token(DecodeTimes(0.1, 0.0, 0.1, 0.0))
    clock.now += 0.1
    rec.draft_free(DecodeTimes(0.1, 0.3, 0.1, 0.25), waited_s=0.1)
    rec.round(RoundResult([1, 2], "sd", "jit", drafted=2, accepted=1, verify_s=0.5))
    clock.now += 0.9
    cpu.now += 0.75
    rec.finish(DecodeTimes(), DecodeTimes(0.6, 0.5, 0.6, 0.45), draft_on_this_thread=True)
    assert stats.python_share == pytest.approx(1 - (0.5 + 0.2 + 0.1) / 1.0)
    assert stats.loop_cpu_s == pytest.approx(0.75)
    assert stats.host_cpu_s == pytest.approx(0.75 - 0.5 - 0.2)  # the read-ahead's 0.25 s of CPU is not this thread's


def test_cpu_figures_are_left_out_when_the_generation_ends_on_another_thread() -> None:
    import threading

    stats = GenerationStats(mode="ar")
    rec = StatsRecorder(stats, Clock(), Clock())
    rec.first_token(DecodeTimes())
    rec.round(RoundResult([1], "ar", verify_s=0.1))
    closer = threading.Thread(target=rec.finish, args=(DecodeTimes(), DecodeTimes()),
                              kwargs={"draft_on_this_thread": False})
    closer.start()
    closer.join()
    assert stats.loop_cpu_s is None and stats.host_cpu_s is None  # another thread's CPU clock says nothing of this loop


def test_each_steps_tokens_and_wall_time_over_its_rounds() -> None:
    # A round's time runs from the end of the round before (the first token's time for the first): here ar rounds
    # of 0.1 s for one token and sd rounds of 0.15 s for three, after a prompt read of 5 s that neither counts.
    clock = Clock()
    stats = GenerationStats(mode="auto")
    rec = StatsRecorder(stats, clock)
    clock.now += 5.0
    rec.first_token(DecodeTimes())
    for rr, took in [(RoundResult([1], "ar"), 0.1)] * 20 + [(RoundResult([1, 2, 3], "sd", "jit", 3, 2), 0.15)] * 10:
        clock.now += took
        rec.round(rr)
        for _ in rr.tokens:
            rec.token()
    assert stats.tokens_by_mode == {"ar": 20, "sd": 30}
    assert stats.seconds_by_mode == pytest.approx({"ar": 2.0, "sd": 1.5})
    assert stats.tokens_per_second == pytest.approx(50 / 8.5)  # the reply's own rate keeps the prompt's read


def test_to_dict_is_asdict_and_a_copy() -> None:
    from dataclasses import asdict

    stats = GenerationStats(mode="auto", rounds_by_mode={"ar": 2}, mode_switches=["ar->sd"], plan_rates={"ar": 1.0})
    got = stats.to_dict()
    assert got == asdict(stats)
    got["rounds_by_mode"]["ar"] = 9
    got["mode_switches"].append("x")
    assert stats.rounds_by_mode == {"ar": 2} and stats.mode_switches == ["ar->sd"]
