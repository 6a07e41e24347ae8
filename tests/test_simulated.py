"""auto against every fixed plan on simulated machines (engine/tools/simmachine.py): deterministic, no model, no clock.

The bars are issue 34's: over replies 2-10 auto reaches 0.95x the best fixed plan, 0.90x on every single reply and
0.85x on the first. Profiles where auto is below a bar today are listed in BELOW with a strict xfail: a change that
lifts one over the bar fails here until it is moved out of the list, as a change that drops one does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.speculative.costmodel import CostModel
from engine.tools import simbench
from engine.tools.simmachine import PROFILES

DATA = Path(__file__).parent / "data"
LATER, FIRST, EVERY = simbench.BARS  # the bars: replies 2-10, the first reply, any one reply
BELOW = {  # (bar, profile) where auto is below the bar today
    "later": set(),
    "every": {"rpc-cpu-50ms"},  # a remote target: auto's first reply spends its early rounds in ar (0.89, 0.81)
    "first": {"rpc-cpu-50ms"},
}
_rows: dict[str, simbench.Row] = {}


def row(name: str) -> simbench.Row:
    if name not in _rows:
        _rows[name] = simbench.bench_profile(PROFILES[name])
    return _rows[name]


def _cases(bar: str) -> list[object]:
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason="auto below the bar here (issue 34)"))
            if n in BELOW[bar] else n for n in PROFILES]


@pytest.mark.parametrize("name", _cases("later"))
def test_over_replies_2_to_10_auto_reaches_095_of_the_best_fixed_plan(name: str) -> None:
    assert row(name).ratio >= LATER


@pytest.mark.parametrize("name", _cases("every"))
def test_on_every_reply_auto_reaches_090_of_the_best_fixed_plan(name: str) -> None:
    assert row(name).worst >= EVERY


@pytest.mark.parametrize("name", _cases("first"))
def test_on_the_first_reply_auto_reaches_085_of_the_best_fixed_plan(name: str) -> None:
    assert row(name).first >= FIRST


def test_the_simulation_is_deterministic() -> None:
    p = PROFILES["cpu-2core-A"]
    assert simbench.run_auto(p, replies=2).rates == simbench.run_auto(p, replies=2).rates


@pytest.mark.parametrize("name", _cases("first"))  # a first-reply figure: below that bar already, it is below here
def test_a_memory_written_while_busy_is_measured_again_within_the_first_reply(name: str) -> None:
    p = PROFILES[name]
    model = CostModel(split=p.machine.split)
    simbench.run_auto(p, replies=2, model=model)  # what earlier sessions measured
    busy = simbench.poisoned(model, {1: 3.5, 3: 2.0, 5: 3.5})  # 1 and 5 tokens 3.5x too slow, 3 tokens 2x
    assert busy.stale
    auto = simbench.run_auto(p, replies=1, model=busy)
    assert auto.rates[0] >= EVERY * row(name).best.rates[0]


@pytest.mark.parametrize("name", ["cpu-2core-B", "h200-deep"])
def test_autos_decisions_on_a_recorded_trace_are_pinned(name: str) -> None:
    """auto's rounds on the first reply (step:drafted:accepted): a change of behaviour shows up as a diff here, to
    be explained in its commit and the file re-recorded (tests/data/auto_trace_<profile>.txt)."""
    want = (DATA / f"auto_trace_{name}.txt").read_text(encoding="utf-8").split()
    assert simbench.run_auto(PROFILES[name], replies=1).trace == want


def test_over_several_seeds_the_bench_prints_each_bar_at_its_lowest_and_mean(
        capsys: pytest.CaptureFixture[str]) -> None:
    p = PROFILES["deep-low"]
    assert simbench.run_auto(p, replies=1, seed=1).rates != simbench.run_auto(p, replies=1).rates  # other draws
    simbench.cmd_simulated(["deep-low"], seeds=2)
    out = capsys.readouterr().out
    assert "deep-low" in out and "lowest / mean over 2 seeds; bars missed in all: 0 of 6" in out
