"""The simulated machines of ``bench --scenarios S``: each profile a :class:`Machine` and a :class:`Regime`, fitted to
measured figures (docs/benchmarks.md)."""

from __future__ import annotations

import dataclasses

from engine.remote import simprofile as remote

from .coupled import CPU_SAMPLED_ACCEPT, MEASURED_K, coupled, position_acceptance
from .machine import Machine, Profile
from .regime import Regime


def _ms(*points: tuple[int, float]) -> tuple[tuple[int, float], ...]:
    return tuple((w, t / 1000) for w, t in points)


def _ms_of(m: Machine) -> tuple[tuple[int, float], ...]:
    return tuple((w, t * 1000) for w, t in m.verify)


# Fitted to measured figures: the H200 runs of the synthetic pair (160- and 64-layer targets) and the 2-core CPU
# scenarios A, B and C of the real pair (docs/benchmarks.md).
H200_DEEP = Machine("h200-deep", _ms((1, 7.4), (5, 13.9), (9, 16.3), (17, 21.0)), 1.3e-3, 0.12,
                    tree_share=0.25, host_s=0.8e-3, noise=0.05)
H200_SHALLOW = Machine("h200-shallow", _ms((1, 3.26), (5, 5.6), (9, 6.6), (17, 8.5)), 1.3e-3, 0.12,
                       tree_share=0.25, host_s=0.8e-3, noise=0.05)
GPU_CPU_DRAFT = Machine("gpu-target-cpu-draft", _ms((1, 3.3), (5, 5.6), (9, 6.6), (17, 8.5)), 18e-3, 0.3,
                        host_s=0.8e-3, noise=0.08)
GPU_MEMBOUND = Machine("gpu-membound", _ms((1, 20.0), (5, 20.3), (9, 20.6), (17, 21.2)), 1.5e-3, 0.01,
                       tree_share=0.1, host_s=0.8e-3, noise=0.05)
CPU_A = Machine("cpu-2core-A", _ms((1, 83.0), (3, 95.0), (5, 125.0), (9, 185.0)), 22e-3, 0.35,
                concurrent_slowdown=1.8, split=True, split_draft_slowdown=1.6, host_s=2e-3, noise=0.12,
                stall_p=0.03, stall=2.0)
CPU_B = Machine("cpu-2core-B", _ms((1, 377.0), (3, 390.0), (5, 401.0), (9, 430.0)), 72e-3, 0.4,
                concurrent_slowdown=1.05, host_s=2e-3, noise=0.1, stall_p=0.03, stall=2.0)
CPU_C = Machine("cpu-2core-C", _ms((1, 191.0), (3, 200.0), (5, 215.0), (9, 250.0)), 22e-3, 0.35,
                concurrent_slowdown=1.8, split=True, split_draft_slowdown=1.6, host_s=2e-3, noise=0.12,
                stall_p=0.03, stall=2.0)
# The real pair's target on an RPC server 50 ms away (a round trip), the draft at home: engine/remote/simprofile.py.
RPC_CPU_50MS = Machine("rpc-cpu-50ms", remote.remote_verify(50.0), remote.DRAFT_TOKEN_S, CPU_B.level_slope,
                       concurrent_slowdown=CPU_B.concurrent_slowdown, host_s=2e-3, noise=0.1,
                       new_shape_s=remote.new_shape_seconds(50.0))
RPC_GREEDY = Regime("rpc-greedy", position_acceptance((remote.SD_TOKENS_PER_ROUND - 1) / MEASURED_K))
# ... scenario R's prompts one by one: code, code, chat, a summary, over and over (auto keeps one cost model for all)
RPC_CODE = Regime("rpc-code", position_acceptance(remote.CODE_SHARE, decay=1.0), depth_decay=1.0)
RPC_SUMMARY = Regime("rpc-summary", position_acceptance(remote.SUMMARY_SHARE, decay=1.0), depth_decay=1.0)
# hard runs fitted to chat's share (0.59 simulated) and as near its one-branch hit rate as runs allow (0.48 simulated)
RPC_CHAT = Regime("rpc-chat", 0.98, depth_decay=1.0, hard_share=0.15, hard_run=4.0, hard_accept=0.2)

# The same link to a GPU server (gpu-membound's widths: a row costs next to nothing there), the draft at home on one
# CPU thread as above: a draft token (71 ms) costs what an ar round over the link does (70 ms), so ar is the best plan
RPC_GPU_50MS = Machine("rpc-gpu-50ms", remote.remote_verify(50.0, compute_ms=_ms_of(GPU_MEMBOUND)),
                       remote.DRAFT_TOKEN_S, CPU_B.level_slope, host_s=2e-3, noise=0.1,
                       new_shape_s=remote.new_shape_seconds(50.0))

# scenario R's chat-poem: 0.21 of a 4-token draft accepted (engine/bench/remote.py), where ar is the best plan
RPC_POEM = Regime("rpc-poem", position_acceptance(0.21))

HIGH, MEDIUM, LOW = Regime("high", 0.9), Regime("medium", 0.7), Regime("low", 0.3)
H200_SAMPLED = Regime("h200-sampled", 0.78, top1=0.25)
# The real pair sampled on the CPU (rejection): its acceptance measured (coupled.py); its draft's alternative after a
# rejection as on the GPU (no CPU run measured one)
CPU_SAMPLED = Regime("cpu-sampled", CPU_SAMPLED_ACCEPT, top1=H200_SAMPLED.top1)
DRIFT, CODE_EDIT = Regime("drifting", 0.9, drift_to=0.3), Regime("code-edit", 0.6, copies=True)

# The tails (issue 63): a distilled draft (acceptance near 1), acceptance that rises within a reply, a machine whose
# timings swing 30 % call to call, and a 2-core host where another program runs for two replies of every five (its
# verifies 2.5x slower; ssd's split threads then lose little, as the cores are contended anyway)
DISTILLED, RISING = Regime("distilled", 0.97, depth_decay=0.995), Regime("rising", 0.4, drift_to=0.9)
H200_NOISY = dataclasses.replace(H200_DEEP, name="h200-deep-noisy", noise=0.3)
CPU_A_NOISY = dataclasses.replace(CPU_A, name="cpu-2core-A-noisy", noise=0.3)
CPU_A_LOADED = dataclasses.replace(CPU_A, name="cpu-2core-A-loaded",
                                   verify=tuple((w, 2.5 * t) for w, t in CPU_A.verify),
                                   draft_token_s=1.3 * CPU_A.draft_token_s, concurrent_slowdown=1.1,
                                   split_draft_slowdown=1.1)
TAILS = (
    Profile("deep-distilled", H200_DEEP, DISTILLED, "a distilled draft"),
    Profile("cpu-B-distilled", CPU_B, DISTILLED, "a distilled draft, F16 target on 1 thread"),
    Profile("deep-rising", H200_DEEP, RISING, "acceptance 0.4, then 0.9"),
    Profile("deep-noisy", H200_NOISY, Regime("h200-greedy", 0.85), "timings swing 30 %"),
    Profile("cpu-A-noisy", CPU_A_NOISY, MEDIUM, "timings swing 30 %"),
    Profile("cpu-A-load", CPU_A_LOADED, MEDIUM, "another program runs, then stops: loaded, loaded, quiet x3",
            then_on=(CPU_A_LOADED, CPU_A, CPU_A, CPU_A)),
)

PROFILES = {p.name: p for p in (
    Profile("cpu-2core-A", CPU_A, MEDIUM, "Q4, 2 threads"), Profile("cpu-2core-C", CPU_C, MEDIUM, "F16, 2 threads"),
    Profile("cpu-2core-B", CPU_B, Regime("b-code", 0.85), "F16 target on 1 thread, draft on the other core"),
    *(Profile(f"{m.name}-sampled-coupled", m, coupled(CPU_SAMPLED), "coupled sampling") for m in (CPU_A, CPU_B, CPU_C)),
    Profile("h200-deep", H200_DEEP, Regime("h200-greedy", 0.85), "160-layer target, greedy"),
    Profile("h200-deep-sampled", H200_DEEP, H200_SAMPLED, "160-layer, sampled"),
    Profile("h200-deep-sampled-coupled", H200_DEEP, coupled(H200_SAMPLED), "160-layer, coupled sampling"),
    Profile("h200-shallow", H200_SHALLOW, Regime("h200-greedy", 0.85), "64-layer target"),
    Profile("gpu-target-cpu-draft", GPU_CPU_DRAFT, Regime("h200-greedy", 0.85), "draft on 16 CPU cores"),
    Profile("gpu-membound", GPU_MEMBOUND, MEDIUM, "verify width nearly free"),
    Profile("deep-high", H200_DEEP, HIGH), Profile("deep-medium", H200_DEEP, MEDIUM),
    Profile("deep-low", H200_DEEP, LOW), Profile("deep-drifting", H200_DEEP, DRIFT),
    Profile("deep-code-edit", H200_DEEP, CODE_EDIT), Profile("cpu-A-code-edit", CPU_A, CODE_EDIT),
    Profile("rpc-cpu-50ms", RPC_CPU_50MS, RPC_GREEDY, "1.5B Q4 target 50 ms away, 1 thread"),
    Profile("rpc-cpu-50ms-mixed", RPC_CPU_50MS, RPC_CODE, "code, code, chat, summary",
            then=(RPC_CODE, RPC_CHAT, RPC_SUMMARY)),
    Profile("rpc-cpu-50ms-poem", RPC_CPU_50MS, RPC_POEM, "a chat the draft seldom guesses, 50 ms away"),
    Profile("rpc-gpu-50ms", RPC_GPU_50MS, RPC_GREEDY, "the target on a GPU 50 ms away, the draft on 1 thread here"),
    *TAILS,
)}
