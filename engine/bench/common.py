"""What the benches share: a hardware scenario (:class:`Scenario`) and its rows of runs (:class:`Row`), the bench
prompts, the machine's facts, one run's record, and a scenario run over every mode and prompt on the real pair.

Scenarios (targets of issue 4):
  A  the pair as shipped (Q4_K_M target), every mode may use all cores;
  B  the target on one thread in every mode, the draft on the other core (ssd's two threads on separate
     cores, as the SSD paper's draft has its own GPU) — rows for the F16 (``B``) and Q4_K_M (``B-q4``) target;
  C  the target dequantized to F16 (a memory-heavy target), all cores.
Each prompt runs every mode back to back (``--repeats`` times; order rotated per pass, so drift cancels in
the ratios); tok/s count decoding after the first token.
"""

from __future__ import annotations

import argparse
import json
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from engine.core.mode import Mode
from engine.core.options import cpu_cores
from engine.core.paths import resources_dir
from engine.core.sampling import SamplingParams
from engine.engine import Engine, EngineConfig, GenerationParams
from engine.errors import EngineError
from engine.speculative.exactness import first_difference
from engine.stats import GenerationStats


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


def record(s: GenerationStats, tokens: list[int], prompt_id: str, mode: str) -> dict[str, Any]:
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
                    rows[(st, m)].runs.append(record(gen.stats, gen.tokens, pr["id"], m))
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
