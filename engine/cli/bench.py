"""``python -m engine bench``: the benchmark's command; each scenario runs in its own module of engine/bench/ (S:
engine/sim/bench.py)."""

from __future__ import annotations

import argparse
import os

from engine.bench.overhead import O_REPEATS
from engine.bench.pair import REPEATS as PAIR_REPEATS
from engine.core.options import MODES
from engine.core.outputs import BACKEND, HOST

from .help import LAYERS_HELP, HelpFormatter, gpu_layers, listing
from .rpc import add_rpc_argument


def cmd_bench(args: argparse.Namespace) -> int:
    from engine.bench.overhead import cmd_overhead
    if args.scenarios.strip().upper() == "O":  # overhead: tiny models, its own module
        return cmd_overhead(args)
    if args.scenarios.strip().upper() == "R":  # remote: the target over llama.cpp's RPC, its own module
        from engine.bench.remote import cmd_remote
        return cmd_remote(args)
    if args.scenarios.strip().upper() == "H":  # recurrent and hybrid tiny pairs: the checkpoint's cost
        from engine.bench.recurrent import cmd_recurrent
        return cmd_recurrent(args)
    if args.scenarios.strip().upper() == "P":  # concurrent requests: our server against llama.cpp's
        from engine.bench.parallel import cmd_parallel
        return cmd_parallel(args)
    if args.scenarios.strip().upper() == "F":  # first replies from fresh memory, auto against ar
        from engine.bench.first import cmd_first
        return cmd_first(args)
    if args.scenarios.strip().upper() == "S":  # simulated machines: no model, no clock
        from engine.sim.bench import cmd_simulated
        return cmd_simulated(seeds=args.seeds)
    from engine.bench.pair import cmd_pair
    return cmd_pair(args)


SCENARIOS = {
    "A": "the pair as shipped (Q4_K_M target); every mode may use all cores",
    "B": "the target on 1 thread in every mode, the draft on another core (ssd's two threads on separate cores); "
         "rows B (F16 target) and B-q4 (Q4_K_M target)",
    "C": "the target dequantized to F16 (a memory-heavy target), all cores",
    "O": "alone: the engine's own overhead per round on tiny generated models, host and backend sampling "
         "(engine/bench/overhead.py; its options start with O:)",
}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    epilog = listing("scenarios", SCENARIOS, "Every prompt runs every mode back to back (order rotated per prompt), "
                     "greedy and sampled; the table and a JSON file with every per-prompt figure are written. "
                     "Without --target/--draft the offline pair is assembled first. S alone: every fixed plan and "
                     "auto on simulated machines, no model, 10 replies of 256 tokens (engine/sim/bench.py). "
                     "R alone: the target on --servers RPC servers here, each behind a proxy adding --delays ms each "
                     "way, the draft local, and llama.cpp's ar over the same link (engine/bench/remote.py). "
                     "H alone: tiny recurrent and hybrid pairs (lfm2, mamba; lfm2 with an attention-only draft), "
                     "ar, sd, ssd and auto with the checkpoint's cost per round (engine/bench/recurrent.py). "
                     "P alone: 1, 2 and 4 concurrent streamed requests to serve --parallel 4 and to llama.cpp's "
                     "llama-server -np 4 with and without the draft (--peer-server; engine/bench/parallel.py). "
                     "F alone: first replies from fresh memory, auto against ar: a chat reply with the target "
                     "behind the last of --delays each way, and a JSON Schema reply here (engine/bench/first.py).")
    p = sub.add_parser("bench", help="benchmark ar, sd, ssd, lookup and auto on the real pair",
                       formatter_class=HelpFormatter, epilog=epilog,
                       description="Measure tokens per second of every mode in hardware scenarios (see below).")
    p.add_argument("--scenarios", default="A,B,C",
                   help="comma list of A, B, C; or F, H, O, P, R or S alone (see below)")
    add_rpc_argument(p)
    p.add_argument("--delays", default="0,5,25", help="R: milliseconds the proxy adds each way, comma list")
    p.add_argument("--servers", default="1,2", help="R: RPC servers the target's layers are split over, comma list")
    p.add_argument("--seeds", type=int, default=1, help="S: run every profile on this many seeds and print the bars "
                   "at their lowest and mean")
    p.add_argument("--modes", default=",".join(MODES), help="comma list of the modes to run")
    p.add_argument("--max-tokens", type=int, default=128, help="tokens per reply")
    p.add_argument("--prompts", type=int, default=None, help="use only the first N prompts of the set")
    p.add_argument("--prompt-ids", help="comma list of prompt ids from resources/bench_prompts.json")
    p.add_argument("--no-sampled", dest="sampled", action="store_false",
                   help="skip the sampled setting (default: greedy and sampled)")
    p.add_argument("--seed", type=int, default=7, help="seed of the sampled setting (temperature 0.7, top-p 0.9)")
    p.add_argument("--k", type=int, default=4, help="draft length for sd, ssd and the peer (auto picks its own)")
    p.add_argument("--fanout", type=int, default=1, help="ssd candidates per outcome position")
    p.add_argument("--budget", type=int, default=1,
                   help="ssd tree branches per round (0 = fanout x (K+1), cut to what pays here once measured); "
                        "on a CPU draft each branch costs, so 1")
    p.add_argument("--geometric", action="store_true", help="geometric fan-out allocation for ssd")
    p.add_argument("--ctx", type=int, default=2048, help="context length")
    p.add_argument("--threads", type=int, default=0, help="cores for 'all cores' scenarios (0 = all)")
    p.add_argument("--target", help="target GGUF (default: the offline pair)")
    p.add_argument("--draft", help="draft GGUF (default: the offline pair)")
    p.add_argument("--peer", help="folder with llama.cpp's llama-completion and llama-speculative-simple")
    p.add_argument("--peer-server", help="P: llama.cpp's llama-server binary (default: $SSD_CHAT_LLAMA_SERVER, PATH)")
    p.add_argument("--out", default=os.path.join("results", "bench.json"), help="the JSON file written")
    _add_overhead_arguments(p)
    p.set_defaults(func=cmd_bench)


def _add_overhead_arguments(p: argparse.ArgumentParser) -> None:
    """Scenario O's own options on ``bench``."""
    p.add_argument("--repeats", type=int, default=None, help="repeats of every (prompt, setting, mode), "
                   f"interleaved; default {O_REPEATS} for O, {PAIR_REPEATS} for A, B, C")
    p.add_argument("--paths", default=f"{HOST},{BACKEND}", help="O: sampling paths to measure (host, backend)")
    p.add_argument("--model-dir", help="O, H: where the tiny models are written (default: the data folder)")
    p.add_argument("--o-prompts", dest="o_prompts", type=int, default=2, help="O: random prompts of 32 tokens")
    p.add_argument("--gpu-layers", type=gpu_layers, default="auto", help=f"O: target layers on the GPU ({LAYERS_HELP})")
    p.add_argument("--draft-gpu-layers", type=gpu_layers, default="auto",
                   help=f"O: draft layers on the GPU ({LAYERS_HELP})")
    p.add_argument("--o-target", help="O: measure this target instead of the tiny one (with --o-draft)")
    p.add_argument("--o-draft", help="O: the draft for --o-target")
