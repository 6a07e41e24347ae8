"""The ssd mode's fallback state machine, driven through fakes of the target and the draft source (no model)."""

from __future__ import annotations

from engine.speculative.ssd import SSDMode, SSDOptions
from engine.speculative.steps import Steps, Threads
from engine.speculative.types import CACHE, JIT, RoundResult
from engine.stats import GenerationStats, StatsRecorder
from tests.spec_fakes import TRUTH, FakeDrafts, FakeTarget, Script

OPTS = SSDOptions(k=3, fanout=1, miss_limit=3, probe_after=5)


def run(script: Script, rounds: int, opts: SSDOptions = OPTS) -> tuple[list[RoundResult], FakeDrafts, SSDMode]:
    drafts = FakeDrafts(script)
    mode = SSDMode(Steps(FakeTarget(), drafts), opts)
    return [mode.step() for _ in range(rounds)], drafts, mode


def test_misses_roll_back_to_sd_after_the_miss_limit() -> None:
    results, drafts, _ = run(Script(), rounds=6)
    assert [r.mode for r in results] == ["ssd", "ssd", "ssd", "ssd", "sd", "sd"]
    assert [r.hit for r in results[:4]] == [None, False, False, False]  # the first round is a forced miss
    assert results[4].why == "3 misses in a row"
    assert [q.budget for q in drafts.requests] == [4, 4, 4, 4, 0, 0]  # sd rounds build no tree
    assert drafts.requests[0].accepted == -1
    assert all(r.speculator == JIT for r in results)


def test_hits_keep_ssd_running() -> None:
    results, drafts, mode = run(Script(hit=lambda i: i % 2 == 1, right=lambda i: 3), rounds=12)
    assert {r.mode for r in results} == {"ssd"}  # never three misses in a row
    assert [r.speculator for r in results[1:5]] == ["cache", JIT, CACHE, JIT]
    assert all(q.accepted == 3 for q in drafts.requests[1:])  # each request names last round's accepted count
    assert not mode.rolled_back


def test_recovered_predictions_return_to_ssd_with_a_forced_miss() -> None:
    # misses until round 4, then the draft's top candidates hold the target's next token
    results, drafts, mode = run(Script(predicts=lambda i: i >= 4), rounds=8)
    modes = [r.mode for r in results]
    assert modes == ["ssd", "ssd", "ssd", "ssd", "sd", "sd", "ssd", "ssd"]
    assert results[6].why == "predictions recovered"
    assert drafts.requests[6].accepted == -1 and results[6].hit is None  # no tree was built for it
    assert drafts.requests[6].budget == OPTS.tree_budget
    assert not mode.rolled_back


def test_a_probe_returns_to_ssd_after_probe_after_sd_rounds() -> None:
    results, _, _ = run(Script(), rounds=4 + OPTS.probe_after + 2)
    modes = [r.mode for r in results]
    assert modes[4 : 4 + OPTS.probe_after] == ["sd"] * OPTS.probe_after
    back = 4 + OPTS.probe_after
    assert modes[back] == "ssd" and results[back].why == "probe"


def test_switches_reported_in_the_stats_follow_the_rounds() -> None:
    stats = GenerationStats(mode="ssd")
    recorder = StatsRecorder(stats)
    results, _, _ = run(Script(predicts=lambda i: i >= 4), rounds=8)
    for rr in results:
        recorder.round(rr)
    assert stats.mode_switches == ["ssd->sd (3 misses in a row)", "sd->ssd (predictions recovered)"]
    assert stats.rounds_by_mode == {"ssd": 6, "sd": 2}
    assert (stats.lookups, stats.hits) == (4, 0)  # the two forced misses are not lookups


def test_threads_split_while_both_run_and_restored_on_close() -> None:
    target, drafts = FakeTarget(), FakeDrafts(Script())
    mode = SSDMode(Steps(target, drafts, Threads(target=2, draft=2, split=(1, 1))), OPTS)
    for _ in range(5):  # ssd rounds, then an sd round while rolled back: all concurrent
        mode.step()
    assert set(target.threads) == {1} and {q.draft_threads for q in drafts.requests} == {1}
    mode.close()
    assert drafts.closed and target.threads[-1] == 2 and drafts.threads == [2]


def test_output_is_the_targets_continuation() -> None:
    results, _, _ = run(Script(hit=lambda i: i % 3 == 0, right=lambda i: i % 4), rounds=20)
    tokens = [t for r in results for t in r.tokens]
    assert tokens == TRUTH[1 : 1 + len(tokens)]
