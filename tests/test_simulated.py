"""auto against every fixed plan on simulated machines (engine/sim/machine.py): deterministic, no model, no clock.

The bars are issue 34's: over replies 2-10 auto reaches 0.95x the best fixed plan, 0.90x on every single reply and
0.85x on the first. Profiles where auto is below a bar today are listed in BELOW with a strict xfail: a change that
lifts one over the bar fails here until it is moved out of the list, as a change that drops one does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.sim import bench as simbench
from engine.sim.coupled import HIT_RATIO_ONE_BRANCH, coupled
from engine.sim.machine import Profile
from engine.sim.profiles import CPU_B, CPU_SAMPLED, PROFILES
from engine.sim.regime import Regime
from engine.speculative.costmodel import CostModel
from engine.speculative.plan import Plan

DATA = Path(__file__).parent / "data"
LATER, FIRST, EVERY = simbench.BARS  # the bars: replies 2-10, the first reply, any one reply
# Where auto is below a bar today, and why (its figure on the draw the tests run)
MIXED = ("the first chat reply after two code replies starts on code's long drafts (K 8) and leaves them only as its "
         "acceptance falls, where K 3 or 4 leads; that reply 0.895")
# issue 63's tails (simprofiles.TAILS)
DISTILLED = ("a distilled draft (acceptance 0.97): the best plan is ssd K 8 with one branch; auto reaches long drafts "
             "late and runs wide trees there (deep: 0.90, first reply 0.79, worst 0.73)")
CPU_DISTILLED = ("a distilled draft on cpu-2core-B: the first reply probes and grows K on 0.4 s rounds, and waits "
                 "once for a 21-branch tree it then leaves (0.75)")
RISING = ("acceptance 0.4, then 0.9 within each reply: auto settles on ar in the first half and never measures the "
          "drafting modes again (0.92, worst 0.87)")
NOISY = "timings swing 30 % call to call: auto runs sd K 2 and narrow trees where ssd K 3 M 4 leads (0.94)"
LOAD = ("another program runs for two replies of five: the quiet replies after the first load are read as a shift and "
        "measured again (0.87, 0.99, 0.97 of sd K 2), those after the second stay on the ssd plan learnt under load: "
        "their mean pace over the spell lies inside the band (0.89, worst 0.70)")
BUSY_TAIL = "the tails' first reply from a memory written while busy, as their first reply with none"
BELOW: dict[str, dict[str, str]] = {
    "later": {"deep-distilled": DISTILLED,
              "deep-rising": RISING, "deep-noisy": NOISY, "cpu-A-load": LOAD},
    "every": {"rpc-cpu-50ms-mixed": MIXED, "deep-distilled": DISTILLED,
              "cpu-B-distilled": CPU_DISTILLED, "deep-rising": RISING, "deep-noisy": NOISY, "cpu-A-load": LOAD},
    "first": {"deep-distilled": DISTILLED, "cpu-B-distilled": CPU_DISTILLED},
    # the first reply after a memory written while busy (its own list: a reply from a memory is not a first one)
    "busy": {"deep-distilled": BUSY_TAIL, "cpu-B-distilled": BUSY_TAIL},
}
_rows: dict[str, simbench.Row] = {}


def row(name: str) -> simbench.Row:
    if name not in _rows:
        _rows[name] = simbench.bench_profile(PROFILES[name])
    return _rows[name]


def _cases(bar: str) -> list[object]:
    below = BELOW[bar]
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=below[n])) if n in below else n
            for n in PROFILES]


@pytest.mark.parametrize("name", _cases("later"))
def test_over_replies_2_to_10_auto_reaches_095_of_the_best_fixed_plan(name: str) -> None:
    assert row(name).ratio >= LATER


@pytest.mark.parametrize("name", _cases("every"))
def test_on_every_reply_auto_reaches_090_of_the_best_fixed_plan(name: str) -> None:
    assert row(name).worst >= EVERY


@pytest.mark.parametrize("name", _cases("first"))
def test_on_the_first_reply_auto_reaches_085_of_the_best_fixed_plan(name: str) -> None:
    assert row(name).first >= FIRST


@pytest.mark.xfail(strict=True, reason="the first reply probes sd K 1 twice (a new width: four round trips) and then "
                   "runs ssd K 1, about as fast as ar there: 0.946 of ar at seed 0 (over ten seeds 0.936 at the "
                   "lowest, 4 of 10 below 0.95)")
def test_over_rpc_a_first_chat_reply_the_draft_seldom_guesses_reaches_095_of_ar() -> None:
    """Issue 63's bar for a first reply over a link: at least AR_FIRST_BAR of ar's (the best fixed plan there)."""
    assert row("rpc-cpu-50ms-poem").first_over_ar >= simbench.AR_FIRST_BAR


def test_the_simulation_is_deterministic() -> None:
    p = PROFILES["cpu-2core-A"]
    assert simbench.run_auto(p, replies=2).rates == simbench.run_auto(p, replies=2).rates


@pytest.mark.parametrize("name", _cases("busy"))
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
    assert "first replies (fresh memory): 0 of 2 below 0.85x the best fixed plan's" in out


def test_a_first_reply_is_weighed_against_ars_first_reply_too() -> None:
    """On a machine where ar is the best fixed plan, auto's first reply against ar's is its first-reply figure."""
    r = row("deep-low")
    assert r.best.plan == "ar" and r.first_over_ar == pytest.approx(r.first)
    assert row("h200-deep").first_over_ar > 1.2  # ssd's machine: the first reply well above ar's


def _one_branch_hits(regime: Regime, replies: int = 20) -> float:
    """ssd's hit rate with one branch and K 4 (the coupled bench's fixed ssd) on cpu-2core-B under ``regime``."""
    hits = simbench.fixed_figures(Profile("one-branch", CPU_B, regime), Plan("ssd", 4, 1), replies)[1]
    assert hits is not None
    return hits


def test_the_coupled_regime_reproduces_the_measured_rise_of_a_one_branch_trees_hit_rate() -> None:
    """The coupled regime moves acceptance and the draft's alternative only; the one-branch tree's hit rate, measured
    apart (x 1.14), follows from them within 0.05."""
    ratio = _one_branch_hits(coupled(CPU_SAMPLED)) / _one_branch_hits(CPU_SAMPLED)
    assert abs(ratio - HIT_RATIO_ONE_BRANCH) < 0.05
