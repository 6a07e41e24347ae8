"""``python -m engine bench``: ar, sd, ssd, lookup and auto on the real pair, in three hardware scenarios.

Scenarios (targets of issue 4):
  A  the pair as shipped (Q4_K_M target), every mode may use all cores;
  B  the target on one thread in every mode, the draft on the other core (ssd's two threads on separate
     cores, as the SSD paper's draft has its own GPU) — rows for the F16 (``B``) and Q4_K_M (``B-q4``) target;
  C  the target dequantized to F16 (a memory-heavy target), all cores.
Each prompt runs every mode back to back (``--repeats`` times; order rotated per pass, so drift cancels in
the ratios); tok/s count decoding after the first token. The table, the per-prompt ratios (:mod:`bench_ratios`)
and a JSON file with every figure are written; ``--peer DIR`` adds llama.cpp's tools.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from engine.core.mode import Mode
from engine.core.options import MODES, cpu_cores
from engine.core.paths import resources_dir
from engine.core.sampling import SamplingParams
from engine.engine import Engine, EngineConfig, GenerationParams
from engine.errors import EngineError
from engine.models import offline
from engine.models.convert import ensure_f16
from engine.speculative.exactness import first_difference
from engine.stats import GenerationStats

from .bench_peer import run_peer
from .bench_ratios import per_prompt, print_ratios, summary
from .bench_table import print_table, summarise


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    target: Path
    threads: int
    draft_threads: int


@dataclass
class Row:
    scenario: str
    setting: str
    mode: str
    runs: list[dict[str, Any]] = field(default_factory=list)

    def total(self, key: str) -> float:
        return float(sum(r.get(key) or 0.0 for r in self.runs))

    @property
    def tps(self) -> float:
        t = self.total("decode_s")
        return self.total("decode_tokens") / t if t > 0 else 0.0

    def mean(self, key: str) -> float | None:
        vals = [r[key] for r in self.runs if r.get(key) is not None]
        return sum(vals) / len(vals) if vals else None


def load_prompts(limit: int | None = None, ids: list[str] | None = None) -> list[dict[str, str]]:
    data: list[dict[str, str]] = json.loads((resources_dir() / "bench_prompts.json").read_text(encoding="utf-8"))
    if ids:
        known = {p["id"]: p for p in data}
        missing = [i for i in ids if i not in known]
        if missing:
            raise EngineError(f"unknown prompt id(s): {', '.join(missing)}")
        data = [known[i] for i in ids]
    return data[:limit] if limit else data


def machine() -> dict[str, Any]:
    import llama_cpp

    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem: int | None = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        mem = None
    return {
        "platform": platform.platform(), "python": platform.python_version(), "cpu": cpu, "cores": cpu_cores(),
        "memory_bytes": mem, "llama_cpp_python": llama_cpp.__version__,
        "llama_system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
    }


def scenarios(names: list[str], target: Path, cores: int, f16: Path | None) -> list[Scenario]:
    out = []
    for n in names:
        if n == "A":
            out.append(Scenario("A", "Q4_K_M target as shipped, all cores", target, cores, cores))
        elif n == "B":
            assert f16 is not None
            out.append(Scenario("B", "F16 target on 1 thread, draft on the other core", f16, 1, 1))
            out.append(Scenario("B-q4", "Q4_K_M target on 1 thread, draft on the other core", target, 1, 1))
        elif n == "C":
            assert f16 is not None
            out.append(Scenario("C", "F16 target, all cores", f16, cores, cores))
        else:
            raise EngineError(f"unknown scenario {n!r} (use A, B, C; or H, O, P, R or S alone)")
    return out


def _record(s: GenerationStats, tokens: list[int], prompt_id: str, mode: str) -> dict[str, Any]:
    decode_s = max(s.seconds - s.ttft_s, 1e-9)
    return {
        "prompt": prompt_id, "mode": mode, "tokens": tokens, "new_tokens": s.new_tokens,
        "decode_tokens": max(s.new_tokens - 1, 0), "decode_s": decode_s, "seconds": s.seconds, "ttft_s": s.ttft_s,
        "tokens_per_second": max(s.new_tokens - 1, 0) / decode_s, "acceptance_rate": s.acceptance_rate,
        "e2e_tokens_per_second": s.tokens_per_second, "plan_rates": s.plan_rates,
        "mean_accepted": s.mean_accepted, "hit_rate": s.hit_rate, "rounds": s.rounds,
        "rounds_by_mode": s.rounds_by_mode, "python_share": s.python_share, "mode_switches": s.mode_switches[:20],
        "mean_verify_ms": s.mean_verify_ms, "mean_tree_ms": s.mean_tree_ms, "backup_uses": s.backup_uses,
    }


def run_scenario(
    sc: Scenario,
    draft: Path,
    prompts: list[dict[str, str]],
    modes: list[str],
    settings: dict[str, SamplingParams],
    args: argparse.Namespace,
    bar: tqdm,  # type: ignore[type-arg]
) -> tuple[list[Row], list[dict[str, Any]]]:
    rows = {(st, m): Row(sc.name, st, m) for st in settings for m in modes}
    exact: list[dict[str, Any]] = []
    cfg = EngineConfig(str(sc.target), str(draft), n_ctx=args.ctx, threads=sc.threads, draft_threads=sc.draft_threads,
                       rpc=args.rpc, tensor_split=args.tensor_split)  # --rpc: the target's layers elsewhere
    with Engine(cfg) as eng:
        # Warm up: page the weights in; auto measures this machine once, as in the user's earlier replies.
        warm = eng.chat_tokens("Say hello.")
        eng.generate(warm, GenerationParams(mode=Mode.SD, max_tokens=8)).run()
        eng.generate(warm, GenerationParams(mode=Mode.AUTO, max_tokens=48, k=args.k)).run()
        passes = 0  # every pass over the modes starts one mode later: drift cancels in the ratios
        for pr in prompts:
            toks = eng.chat_tokens(pr["prompt"])
            for st, sampling in [(st, sp) for _ in range(args.repeats) for st, sp in settings.items()]:
                order, passes = modes[passes % len(modes):] + modes[: passes % len(modes)], passes + 1
                results: dict[str, list[int]] = {}
                for m in order:
                    bar.set_description(f"{sc.name} {pr['id']} {st} {m}")
                    params = GenerationParams(mode=Mode(m), max_tokens=args.max_tokens, sampling=sampling, k=args.k,
                                              fanout=args.fanout, budget=args.budget, geometric=args.geometric)
                    gen = eng.generate(toks, params).run()
                    results[m] = gen.tokens
                    rows[(st, m)].runs.append(_record(gen.stats, gen.tokens, pr["id"], m))
                    bar.update(1)
                if st == "greedy" and "ar" in results:
                    exact.append(_exactness(eng, sc.name, pr["id"], toks, results))
    return list(rows.values()), exact


def _exactness(
    eng: Engine, scenario: str, pid: str, prompt: list[int], results: dict[str, list[int]]
) -> dict[str, Any]:
    ref = results["ar"]
    rep: dict[str, Any] = {"scenario": scenario, "prompt": pid}
    for m, toks in results.items():
        if m == "ar":
            continue
        if toks == ref:
            rep[m] = {"identical": True}
            continue
        i = first_difference(toks, ref)
        assert i is not None
        rep[m] = {"identical": False, "first_divergence": i, "top2_margin": eng.top2_margin(prompt + ref[:i])}
    return rep


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench_overhead import REPEATS, cmd_overhead
    if args.scenarios.strip().upper() == "O":  # overhead: tiny models, its own module
        return cmd_overhead(args)
    if args.scenarios.strip().upper() == "R":  # remote: the target over llama.cpp's RPC, its own module
        from .bench_remote import cmd_remote
        return cmd_remote(args)
    if args.scenarios.strip().upper() == "H":  # recurrent and hybrid tiny pairs: the checkpoint's cost
        from .bench_recurrent import cmd_recurrent
        return cmd_recurrent(args)
    if args.scenarios.strip().upper() == "P":  # concurrent requests: our server against llama.cpp's
        from .bench_parallel import cmd_parallel
        return cmd_parallel(args)
    if args.scenarios.strip().upper() == "S":  # simulated machines: no model, no clock
        from engine.sim.bench import cmd_simulated
        return cmd_simulated(seeds=args.seeds)
    args.repeats = args.repeats or REPEATS
    if args.target and args.draft:
        target, draft = Path(args.target), Path(args.draft)
    else:
        pair = offline.ensure_pair()
        target, draft = pair.target, pair.draft
    names = [s.strip().upper() for s in args.scenarios.split(",") if s.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise EngineError(f"unknown mode {m!r} (use {', '.join(MODES)})")
    f16 = ensure_f16(target) if any(n in ("B", "C") for n in names) else None
    prompts = load_prompts(args.prompts, [i for i in (args.prompt_ids or "").split(",") if i])
    settings = {"greedy": SamplingParams()}
    if args.sampled:
        settings["sampled"] = SamplingParams(temperature=0.7, top_p=0.9, seed=args.seed)
    scs = scenarios(names, target, args.threads or cpu_cores(), f16)
    total = len(scs) * len(prompts) * len(settings) * len(modes) * args.repeats
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    rows: list[Row] = []
    exact: list[dict[str, Any]] = []
    with tqdm(total=total, file=sys.stderr, unit="run", dynamic_ncols=True) as bar:
        for sc in scs:
            r, e = run_scenario(sc, draft, prompts, modes, settings, args, bar)
            rows += r
            exact += e
            if args.peer:
                with Engine(EngineConfig(str(sc.target), None, n_ctx=args.ctx, threads=1)) as eng:
                    texts = [eng.target_model.detokenize(eng.chat_tokens(p["prompt"])) for p in prompts]
                rows += run_peer(Path(args.peer), sc, draft, texts, args)
    table = summarise(rows, exact)
    print_table(table)
    groups = [{"scenario": r.scenario, "setting": r.setting, "mode": r.mode, "runs": r.runs} for r in rows]
    print_ratios(ratios := per_prompt(groups))
    result = {
        "command": "python -m engine bench " + " ".join(sys.argv[[*sys.argv, "bench"].index("bench") + 1:]),
        "started": started, "machine": machine(),
        "models": {"target": str(target), "draft": str(draft), "f16_target": str(f16) if f16 else None},
        "settings": {"max_tokens": args.max_tokens, "k": args.k, "fanout": args.fanout, "budget": args.budget,
                     "geometric": args.geometric, "ctx": args.ctx,
                     "sampled": {"temperature": 0.7, "top_p": 0.9, "seed": args.seed} if args.sampled else None},
        "scenarios": [{"name": s.name, "description": s.description, "target": str(s.target), "threads": s.threads,
                       "draft_threads": s.draft_threads} for s in scs],
        "table": table, "ratios": {"per_prompt": ratios, "summary": summary(ratios)}, "exactness": exact,
        "runs": groups,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")
    return 0


SCENARIOS = {
    "A": "the pair as shipped (Q4_K_M target); every mode may use all cores",
    "B": "the target on 1 thread in every mode, the draft on another core (ssd's two threads on separate cores); "
         "rows B (F16 target) and B-q4 (Q4_K_M target)",
    "C": "the target dequantized to F16 (a memory-heavy target), all cores",
    "O": "alone: the engine's own overhead per round on tiny generated models, host and backend sampling "
         "(engine/tools/bench_overhead.py; its options start with O:)",
}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from engine.cli.help import HelpFormatter, listing
    from engine.cli.rpc import add_rpc_argument

    epilog = listing("scenarios", SCENARIOS, "Every prompt runs every mode back to back (order rotated per prompt), "
                     "greedy and sampled; the table and a JSON file with every per-prompt figure are written. "
                     "Without --target/--draft the offline pair is assembled first. S alone: every fixed plan and "
                     "auto on simulated machines, no model, 10 replies of 256 tokens (engine/sim/bench.py). "
                     "R alone: the target on --servers RPC servers here, each behind a proxy adding --delays ms each "
                     "way, the draft local, and llama.cpp's ar over the same link (engine/tools/bench_remote.py). "
                     "H alone: tiny recurrent and hybrid pairs (lfm2, mamba; lfm2 with an attention-only draft), "
                     "ar, sd, ssd and auto with the checkpoint's cost per round (engine/tools/bench_recurrent.py). "
                     "P alone: 1, 2 and 4 concurrent streamed requests to serve --parallel 4 and to llama.cpp's "
                     "llama-server -np 4 with and without the draft (--peer-server; engine/tools/bench_parallel.py).")
    p = sub.add_parser("bench", help="benchmark ar, sd, ssd, lookup and auto on the real pair",
                       formatter_class=HelpFormatter, epilog=epilog,
                       description="Measure tokens per second of every mode in hardware scenarios (see below).")
    p.add_argument("--scenarios", default="A,B,C", help="comma list of A, B, C; or H, O, P, R or S alone (see below)")
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
    from .bench_overhead import add_arguments

    add_arguments(p)
    p.set_defaults(func=cmd_bench)
