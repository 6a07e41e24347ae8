"""The simulated machines whose text changes: replies that take regimes in turn, and chat's hard runs, fitted to
scenario R's prompts (engine/remote/simprofile.py)."""

from __future__ import annotations

from engine.remote import simprofile as remote
from engine.sim import bench as simbench
from engine.sim.coupled import position_acceptance
from engine.sim.machine import Profile
from engine.sim.profiles import PROFILES, RPC_CHAT, RPC_CODE, RPC_CPU_50MS, RPC_SUMMARY
from engine.sim.regime import Regime
from engine.speculative.plan import Plan

REPLIES = 12


def _fixed(regime: Regime, plan: Plan) -> tuple[float, float | None]:
    """The share accepted and the hit rate of ``plan`` run fixed on ``regime``'s replies, on scenario R's machine."""
    return simbench.fixed_figures(Profile("fit", RPC_CPU_50MS, regime), plan, REPLIES)


def test_the_mixed_profiles_replies_take_its_regimes_in_turn() -> None:
    p = PROFILES["rpc-cpu-50ms-mixed"]
    assert [p.regime_at(i) for i in range(9)] == [RPC_CODE, RPC_CODE, RPC_CHAT, RPC_SUMMARY] * 2 + [RPC_CODE]
    assert simbench._steps(p, 2, 64, 0).regime is RPC_CHAT


def test_each_regime_accepts_the_share_scenario_r_measured() -> None:
    for regime, share in ((RPC_CODE, remote.CODE_SHARE), (RPC_CHAT, remote.CHAT_SHARE),
                          (RPC_SUMMARY, remote.SUMMARY_SHARE)):
        assert abs(_fixed(regime, Plan("sd", 4))[0] - share) < 0.03, regime.name


def test_chats_hard_runs_make_a_one_branch_tree_hit_more_than_independent_positions_would() -> None:
    """At the same share accepted, drafts that are mostly all accepted or rejected at once leave the branch after a
    full acceptance right more often: what fixed ssd measured on chat-git (0.57)."""
    independent = Regime("independent", position_acceptance(remote.CHAT_SHARE, decay=1.0), depth_decay=1.0)
    share, hit = _fixed(RPC_CHAT, Plan("ssd", 4, 1))
    other_share, other_hit = _fixed(independent, Plan("ssd", 4, 1))
    assert abs(share - other_share) < 0.03
    assert hit is not None and other_hit is not None and hit > 1.3 * other_hit
