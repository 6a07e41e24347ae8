"""Scenario O's measurement on the tiny models: the decodes each mode runs on the generating thread per round."""

from __future__ import annotations

import argparse

from engine.bench.overhead import _per_run, _vs_bare, measure, verdicts
from engine.cli import bench
from engine.tiny.models import TinyPair


def test_the_floor_counts_the_decodes_a_round_runs_on_the_generating_thread(tiny: TinyPair) -> None:
    parser = argparse.ArgumentParser()
    bench.register(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["bench", "--scenarios", "O", "--modes", "ar,sd,ssd,auto", "--paths", "host",
                              "--max-tokens", "12", "--repeats", "1", "--o-prompts", "1"])
    floor, table = measure(tiny.target, tiny.draft_related, args)
    row = {(t["setting"], t["mode"]): t for t in table}
    for setting in ("greedy", "sampled"):
        assert row[(setting, "ar")]["decodes_per_round"] == 1.0  # one token, one decode
        sd = row[(setting, "sd")]
        # A round: the draft syncs (one decode, its first token's row), decodes each further token it drafts
        # (three for K = 4, fewer after an end token), and the target verifies the lot in one decode
        for run in sd["runs"]:
            assert run["loop_decodes"] == run["drafted"] + run["rounds"]
        assert 2.0 <= sd["decodes_per_round"] <= 5.0
        assert row[(setting, "ssd")]["decodes_per_round"] == 1.0  # the draft decodes on its own thread
        assert row[(setting, "auto")]["decodes_per_round"] is None  # a mix: not counted
        assert sd["floor_ms_per_round"] == sd["decodes_per_round"] * floor["host_ms"]
    assert any("decodes a round on this thread" in line for line in verdicts(table, args.k))


def test_a_stalled_run_moves_the_engines_figure_no_more_than_the_bare_loops() -> None:
    runs = [{"loop_s": 0.2, "tokens": 100}, {"loop_s": 0.21, "tokens": 100}, {"loop_s": 0.9, "tokens": 100}]
    assert _per_run(runs, "loop_s", "tokens") == 2.1  # the median, as the bare loop's floor; the mean read 4.37


def test_a_slow_phase_shared_by_a_run_and_its_bare_loop_leaves_their_ratio() -> None:
    runs = [{"loop_s": 0.2, "tokens": 100, "bare_ms": 1.6}, {"loop_s": 0.4, "tokens": 100, "bare_ms": 3.2},
            {"loop_s": 0.22, "tokens": 100, "bare_ms": 1.6}]
    assert _vs_bare(runs, "loop_s", "bare_ms") == 1.25  # 1.25, 1.25, 1.375: the slow pair reads as the others
