"""auto's planner, driven by synthetic round events (no model, no clock), and auto's composition of the steps."""

from __future__ import annotations

from collections.abc import Callable

from engine.spec.auto import HOLD_ROUNDS, AutoMode, AutoPlanner
from engine.spec.costmodel import CostModel, Plan
from engine.spec.ssd import SSDOptions
from engine.spec.steps import Steps
from engine.spec.types import CACHE, JIT, Draft, RoundResult, TreeStats
from tests.spec_fakes import FakeDrafts, FakeTarget, Script

World = Callable[[Plan], RoundResult]


def world(verify: Callable[[int], float], draft_token_s: float, accepted: Callable[[int], int],
          hit: bool = False, level_s: float = 0.0) -> World:
    """What each plan's round would report on an imagined machine."""

    def round_for(plan: Plan) -> RoundResult:
        if plan.mode == "ar":
            return RoundResult([1], "ar", verify_s=verify(1))
        k = plan.k
        n = accepted(k)
        ssd_hit = plan.mode == "ssd" and hit
        draft = Draft([5] * k, None, CACHE if ssd_hit else JIT, serve_s=draft_token_s * k)
        trees = (TreeStats(levels=k, branches=plan.budget, seconds=level_s * (k + 1)),) if plan.mode == "ssd" else ()
        wait = 0.0 if ssd_hit else draft_token_s * k
        return RoundResult([5] * n + [9], plan.mode, draft.source, k, n, ssd_hit if plan.mode == "ssd" else None,
                           verify_s=verify(k + 1), wait_s=wait, trees=trees, draft=draft)

    return round_for


def drive(planner: AutoPlanner, w: World, rounds: int) -> list[Plan]:
    plans = []
    for _ in range(rounds):
        plan = planner.next_plan()
        planner.learn(plan, w(plan))
        plans.append(plan)
    return plans


def test_a_fresh_planner_measures_ar_and_sd_first() -> None:
    planner = AutoPlanner(CostModel(), k=4)
    first = [planner.next_plan() for _ in range(3)]
    assert first == [Plan("ar"), Plan("sd", 4), Plan("sd", 4)]
    assert planner.why.startswith("probe")


def test_ar_wins_when_the_draft_is_slow_and_wrong() -> None:
    w = world(verify=lambda width: 0.1 * (1 + 0.3 * (width - 1)), draft_token_s=0.08, accepted=lambda k: 0)
    plans = drive(AutoPlanner(CostModel(), k=4), w, rounds=40)
    assert set(plans[-20:]) == {Plan("ar")}


def test_sd_with_a_long_draft_wins_when_the_draft_is_cheap_and_right() -> None:
    w = world(verify=lambda width: 0.1 + 0.005 * (width - 1), draft_token_s=0.005, accepted=lambda k: k)
    plans = drive(AutoPlanner(CostModel(), k=2), w, rounds=60)
    # it tried a tree (whose rounds never hit here), then settled on sd with auto's longest draft
    assert any(p.mode == "ssd" for p in plans)
    assert set(plans[-HOLD_ROUNDS * 10 :]) == {Plan("sd", 8)}, plans[-10:]


def test_ssd_wins_when_its_tree_fits_the_verify_and_hits() -> None:
    w = world(verify=lambda width: 0.2 + 0.01 * (width - 1), draft_token_s=0.03, accepted=lambda k: k - 1,
              hit=True, level_s=0.01)
    plans = drive(AutoPlanner(CostModel(), k=3), w, rounds=60)
    assert any(p.mode == "ssd" for p in plans[:12])  # explored early: a tree that always hits could pay
    assert {p.mode for p in plans[-20:]} == {"ssd"}, plans[-10:]


def test_without_adaptive_k_every_plan_keeps_the_given_k() -> None:
    w = world(verify=lambda width: 0.1 + 0.005 * (width - 1), draft_token_s=0.005, accepted=lambda k: k)
    plans = drive(AutoPlanner(CostModel(), k=3, adaptive=False), w, rounds=40)
    assert {p.k for p in plans if p.mode != "ar"} == {3}


class ScriptedPlanner(AutoPlanner):
    def __init__(self, plans: list[Plan]) -> None:
        super().__init__(CostModel(), k=3)
        self.script = list(plans)
        self.learned: list[tuple[Plan, RoundResult]] = []

    def next_plan(self) -> Plan:
        self.why = f"scripted {self.script[0]}"
        return self.script.pop(0)

    def learn(self, plan: Plan, rr: RoundResult) -> None:
        self.learned.append((plan, rr))


def test_auto_runs_each_plan_with_the_shared_steps() -> None:
    plans = [Plan("ar"), Plan("sd", 3), Plan("ssd", 3, 4), Plan("ssd", 3, 4), Plan("ar"), Plan("ssd", 2, 3)]
    planner = ScriptedPlanner(plans)
    drafts = FakeDrafts(Script(right=lambda i: 2))
    mode = AutoMode(Steps(FakeTarget(), drafts), planner, SSDOptions(backup="ngram"))
    results = [mode.step() for _ in plans]
    assert [r.mode for r in results] == [p.mode for p in plans]
    assert results[2].why == "scripted ssd(K=3, M=4)"
    reqs = drafts.requests  # ar rounds ask the draft side for nothing
    assert [(q.k, q.budget, q.accepted) for q in reqs] == [(3, 0, -1), (3, 4, -1), (3, 4, 2), (2, 3, -1)]
    assert [q.backup for q in reqs] == [JIT, "ngram", "ngram", "ngram"]  # sd rounds draft with the model
    assert all(q.geometric for q in reqs[1:])
    assert [p for p, _ in planner.learned] == plans
    mode.close()
    assert drafts.closed
