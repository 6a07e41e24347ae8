"""Host-time figures: a decode on a GPU is waited for before its time is counted (so python_share means there what
it means on a CPU); on the CPU build nothing changes (no wait, the same figures' structure)."""

from __future__ import annotations

import argparse

from engine import Engine, EngineConfig, GenerationParams
from engine.bench.overhead import BareLoop, measure
from engine.cli import bench
from engine.native import offload
from engine.tiny.models import TinyPair


def test_a_cpu_decode_is_not_waited_for_and_a_waited_one_decodes_the_same(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), None, n_ctx=256)) as eng:
        ctx = eng.target_ctx
        assert ctx.synchronizes == (offload.supports_gpu_offload() and ctx.on_gpu)
        prompt = eng.tokenize("the host time of a round")
        plain = eng.generate(prompt, GenerationParams(mode="ar", max_tokens=16)).run()
        ctx.synchronizes = True  # what a GPU context does: llama_synchronize inside the timed decode
        before = ctx.decode_seconds
        waited = eng.generate(prompt, GenerationParams(mode="ar", max_tokens=16)).run()
        assert waited.tokens == plain.tokens
        assert ctx.decode_seconds > before
        for s in (plain.stats, waited.stats):
            assert s.python_share is not None and 0.0 <= s.python_share <= 1.0
            assert s.host_cpu_s is not None and s.loop_cpu_s is not None and 0.0 <= s.host_cpu_s <= s.loop_cpu_s


def test_scenario_o_keeps_its_figures_on_the_cpu_build(tiny: TinyPair) -> None:
    parser = argparse.ArgumentParser()
    bench.register(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["bench", "--scenarios", "O", "--modes", "ar,lookup", "--paths", "host",
                              "--max-tokens", "12", "--repeats", "1", "--o-prompts", "1"])
    assert args.gpu_layers == args.draft_gpu_layers == -2  # auto: nothing on the GPU of a CPU build
    floor, table = measure(tiny.target, tiny.draft_related, args)
    assert 0.0 < floor["decode_ms"] < floor["ms_per_token"] and floor["host_ms"] > 0.0
    for row in table:
        for run in row["runs"]:
            assert 0.0 <= run["host_s"] <= run["loop_s"]
        assert row["host_ms_per_round"] >= 0.0 and row["decodes_per_round"] == 1.0
    loop = BareLoop(tiny.target, args.gpu_layers)
    try:
        assert loop.sync == offload.supports_gpu_offload()  # the bare loop waits for a GPU as the engine does
    finally:
        loop.close()
