"""A verify whose batch shape is new to the target's context builds its graph first (over RPC, four round trips
more): the context says so, and the cost model learns neither that verify's width nor its plan from it."""

from __future__ import annotations

import dataclasses

import pytest

from engine.core.backend import Model
from engine.core.context import Context, ContextParams
from engine.core.outputs import chain_spec
from engine.core.sampling import SamplingParams
from engine.remote import simprofile as remote
from engine.sim import profiles as simprofiles
from engine.sim.bench import _steps
from engine.speculative.costmodel import CostModel
from engine.speculative.learning import RoundLearner
from engine.speculative.plan import AR, Plan
from engine.speculative.planner import AutoPlanner
from engine.speculative.target import Target
from engine.speculative.types import JIT, Draft, RoundResult
from tests.tiny_models import TinyPair


def test_the_context_tells_a_batch_shape_it_has_not_decoded_before(tiny: TinyPair) -> None:
    with Context(Model(tiny.target), ContextParams(n_ctx=256, n_batch=64)) as ctx:
        seen = []
        for tokens, outputs in (([5, 6, 7], [0, 1, 2]), ([8, 9, 10], [0, 1, 2]), ([11], [0]), ([12, 13, 14], [2]),
                                ([15, 16, 17], [0, 1, 2]), ([18], [0])):
            pos = ctx.seq_pos_max(0) + 1
            ctx.decode_out(tokens, range(pos, pos + len(tokens)), 0, outputs)
            seen.append(ctx.new_shape)
        assert seen == [True, False, True, True, False, False]  # three rows, one row, three rows with one output
        ctx.set_sampling(chain_spec(SamplingParams(), ctx.n_vocab))  # a sampler chain is a graph of its own
        pos = ctx.seq_pos_max(0) + 1
        ctx.decode_out([19], [pos], 0, [0])
        assert ctx.new_shape
        assert not Target(ctx.model, ctx).new_shape  # a local build costs next to nothing: its verify is a sample


def test_a_width_first_run_after_a_build_was_measured_stands_in_less_the_builds_cost() -> None:
    model = CostModel()
    model.add_verify(5, 0.6, build=True)
    model.add_verify(5, 0.4)  # a build costs 0.2 s here
    model.add_verify(3, 0.5, build=True)
    assert model.t_verify(3) == pytest.approx(0.3)
    local = CostModel()
    local.add_verify(5, 0.41, build=True)
    local.add_verify(5, 0.4)
    local.add_verify(3, 0.3, build=True)
    assert local.t_verify(3) == 0.3  # a cost within a timing's noise is left on the figure


def _sd_round(k: int, verify_s: float, *, new_shape: bool) -> RoundResult:
    draft = Draft([1] * k, None, JIT, serve_s=0.07 * k)
    return RoundResult([1] * (k + 1), "sd", JIT, k, k, verify_s=verify_s, wait_s=draft.serve_s, draft=draft,
                       new_shape=new_shape)


def test_a_graph_builds_time_stands_in_for_its_width_only_until_the_widths_next_verify() -> None:
    model = CostModel()
    learner = RoundLearner(model)
    learner.learn(AR, RoundResult([1], "ar", verify_s=0.4, new_shape=True))
    assert model.t_verify(1) == 0.4  # nothing better yet
    learner.learn(AR, RoundResult([1], "ar", verify_s=0.2))
    assert model.t_verify(1) == 0.2  # replaced, not averaged
    plan = Plan("sd", 4)
    learner.learn(plan, _sd_round(4, 0.9, new_shape=True))
    assert plan not in model.tallies  # the build's round is no round of the plan
    assert model.acceptance.value is not None  # what the draft got right still counts
    learner.learn(plan, _sd_round(4, 0.4, new_shape=False))
    assert model.t_verify(5) == 0.4 and model.tallies[plan].n == 1
    model.add_verify(5, 0.9, build=True)  # a figure of the width (read back from disk): a build teaches it nothing
    assert model.t_verify(5) == 0.4


def _learnt_widths(*, skip_new_shapes: bool) -> dict[int, float]:
    """sd rounds on the simulated remote target (four round trips 50 ms away for each new width): K 4, and every
    eighth round a shorter draft (the bench's other modes, a lookup round), so each short width runs a few times."""
    profile = simprofiles.PROFILES["rpc-cpu-50ms"]
    steps = _steps(profile, 0, 400, seed=0)
    model = CostModel()
    learner = RoundLearner(model)
    learner.learn(AR, steps.ar())
    for i in range(72):
        rr = steps.sd(4 if i % 8 else 1 + i // 8 % 3)
        learner.learn(Plan("sd", rr.drafted), rr if skip_new_shapes else dataclasses.replace(rr, new_shape=False))
    return {w: model.t_verify(w) for w in range(2, 6)}


def test_the_simulated_remote_targets_widths_are_learnt_at_their_steady_cost() -> None:
    machine = simprofiles.PROFILES["rpc-cpu-50ms"].machine
    assert machine.new_shape_s == remote.new_shape_seconds(50.0) == 0.2
    steady = {w: machine.t_verify(w) + machine.host_s for w in range(2, 6)}
    learnt = _learnt_widths(skip_new_shapes=True)
    assert all(abs(learnt[w] / steady[w] - 1) < 0.1 for w in steady), (learnt, steady)
    # taught the graph builds too, the rarer widths stay dear (what kept auto off short drafts on a remote target)
    polluted = _learnt_widths(skip_new_shapes=False)
    assert max(polluted[w] / steady[w] for w in steady) > 1.15, (polluted, steady)


def test_a_build_is_priced_into_the_first_round_of_a_plan_whose_width_the_context_has_not_run() -> None:
    model = CostModel()
    model.add_verify(5, 0.6, build=True)
    model.add_verify(5, 0.4)
    assert model.build.value == pytest.approx(0.2) and model.built == {5}
    planner = AutoPlanner(model, k=4)
    assert planner.first_cost(Plan("sd", 4)) == 0.0
    assert planner.first_cost(Plan("ssd", 2, 3)) == pytest.approx(0.2)
    assert planner.first_cost(AR) == pytest.approx(0.2)


def test_a_build_stands_in_for_its_width_only_while_no_two_widths_are_measured_without_one() -> None:
    model = CostModel()
    for width, seconds in ((1, 0.25), (5, 0.45)):
        model.add_verify(width, seconds, build=True)
        model.add_verify(width, seconds)
    model.add_verify(3, 0.75, build=True)  # the build of a width that then never runs again
    assert model.t_verify(3) == pytest.approx(0.35)  # on the line through 1 and 5, not the build's 0.75
