"""The cost model keeps derived figures between updates (a decision asks for them dozens of times): after
every kind of update it must answer as a model rebuilt from its state alone (nothing kept) would."""

from __future__ import annotations

import numpy as np

from engine.speculative import memory
from engine.speculative.costmodel import CostModel
from engine.speculative.plan import Plan
from engine.speculative.planner import AutoPlanner

ORDERS = ([4, 4, 3, 2], [1], [2, 3, 4, 4, 4, 4, 4, 4, 4], [])


def answers(m: CostModel) -> list[object]:
    """Every figure a round's decisions read."""
    out: list[object] = []
    out += [m.t_verify(w, split) for w in range(1, 20) for split in (False, True)]
    out += [m.t_level(w) for w in range(1, 14)]
    out += [m.hit_prob(k, b) for k in (1, 3, 6) for b in (1, 2, k + 1, 3 * (k + 1))]
    out += [m.lookup_acceptance(o, d) for o in (1, 2, 3, 4, 5) for d in range(6)]
    out += [m.lookup_best(orders) for orders in ORDERS]
    out += [m.delivered(mode) for mode in ("ar", "sd", "ssd", "lookup")]
    planner = AutoPlanner(m, 4)
    out += [(p, m.rate(p), m.fits_window(p.k, p.budget, True)) for p in planner.candidates()]
    return out


def rebuilt(m: CostModel) -> CostModel:
    return memory.restore(memory.dump(m), m.split)


def test_kept_figures_follow_every_update() -> None:
    rng = np.random.default_rng(5)
    m = CostModel(split=True)
    assert answers(m) == answers(rebuilt(m))
    updates = [
        lambda: m.add_verify(int(rng.integers(1, 18)), float(rng.uniform(0.02, 0.2))),
        lambda: m.add_verify(int(rng.integers(1, 10)), float(rng.uniform(0.03, 0.3)), True),
        lambda: m.add_level(int(rng.integers(1, 12)), float(rng.uniform(0.005, 0.05))),
        lambda: m.draft_token.add(float(rng.uniform(0.005, 0.03))),
        lambda: m.acceptance.add_round(int(rng.integers(0, 5)), 4),
        lambda: m.top1.add(float(rng.integers(0, 2))),
        lambda: m.next_guess.add(float(rng.integers(0, 2))),
        lambda: m.observe(Plan(*[("ar", 0, 0), ("sd", 3, 0), ("ssd", 4, 5), ("lookup", 0, 0)][int(rng.integers(4))]),
                          int(rng.integers(1, 5)), float(rng.uniform(0.02, 0.3)), 2.0, 0.1),
        lambda: m.learn_lookup([int(x) for x in rng.integers(1, 5, size=int(rng.integers(1, 8)))],
                               int(rng.integers(0, 8)), int(rng.integers(0, 3))),
    ]
    for step in range(400):
        before = answers(m)  # asked (and kept) before the update
        updates[step % len(updates) if step < 90 else int(rng.integers(len(updates)))]()
        after = answers(m)
        assert after == answers(rebuilt(m)), f"step {step}: a kept figure did not follow the update"
        if step == 0:
            assert after != before  # the first update (a verify width) moves what the model answers
