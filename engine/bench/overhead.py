"""Bench scenario ``O`` (overhead): a round's host work where ``llama_decode`` is as short as on an accelerator.

``python -m engine bench --scenarios O`` writes two tiny random llama models (2 layers, n_embd 64)
that carry the offline pair's 151,936-token vocabulary (a synthetic vocabulary of the same width
where the pair is not installed), so a decode costs about a millisecond while every logits row is
as wide as the real pair's. It measures:

- the floor: a bare ctypes loop — decode one token, copy its row, argmax — per token;
- the engine, per mode (ar, sd, ssd, lookup, auto), greedy and sampled at the defaults (temperature
  0.8, top-k 40, top-p 0.95, min-p 0.05), on each sampling path (``host``: numpy on the rows in
  place; ``backend``: llama.cpp's sampler chain): milliseconds per token, and host time per round
  on the generating thread (outside llama_decode and outside waiting for the draft thread).

Runs are interleaved (modes rotated per prompt) and repeated; each engine run follows a bare loop run on its prompt,
and its ratio to the bare loop is taken against that run. Every figure is the median over the runs, for the engine
and the bare loop alike; the table and a JSON file go to ``results/``. Compare figures within one run: the host
load moves them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import llama_cpp as ll
import numpy as np

from engine.core.backend import Model
from engine.core.mode import Mode
from engine.core.options import MODES
from engine.core.paths import user_data_dir
from engine.core.sampling import SamplingParams
from engine.engine import Engine, EngineConfig, GenerationParams
from engine.models import offline
from engine.tiny.synthetic import TINY, cached_tokenizer, write_llama

SETTINGS = {"greedy": SamplingParams(), "sampled": SamplingParams(temperature=0.8)}  # sampled: the defaults
COUNTED = ("ar", "sd", "ssd", "lookup")  # the modes whose decodes on the generating thread are known (auto mixes)
TARGETS = {"ar_greedy_x": 1.10, "ar_sampled_x": 1.25, "host_round_greedy_ms": 0.5, "host_round_sampled_ms": 1.0}


def tiny_pair(folder: Path) -> tuple[Path, Path, str]:
    """The tiny target and its related draft over the offline pair's vocabulary (written once, then reused)."""
    pair = offline.installed_pair()
    source = pair.draft if pair is not None else None
    tok = cached_tokenizer(source, folder / "qwen-tokenizer.json")
    target, draft = folder / f"o-target-{tok.source}.gguf", folder / f"o-draft-n002-{tok.source}.gguf"
    if not target.exists() or not draft.exists():
        folder.mkdir(parents=True, exist_ok=True)
        write_llama(target, tok, TINY, seed=1, logit_scale=4.0)
        write_llama(draft, tok, TINY, seed=1, logit_scale=4.0, noise=0.02)  # ~75 % accepted
    return target, draft, tok.source


class BareLoop:
    """Decode one token, copy the row, argmax: the floor any engine on this model pays per token."""

    def __init__(self, path: Path, layers: int = 0) -> None:
        self.model = Model(path, gpu_layers=layers)
        cp = ll.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch = 1024, 512, 512
        cp.n_threads = cp.n_threads_batch = 1
        cp.flash_attn_type, cp.no_perf = 1, True
        self.ctx = ll.llama_init_from_model(self.model.ptr, cp)
        self.batch = ll.llama_batch_init(512, 0, 1)
        self.sync = self.model.output_on_gpu  # the engine's Context does the same

    def close(self) -> None:
        ll.llama_batch_free(self.batch)
        ll.llama_free(self.ctx)
        self.model.close()

    def run(self, prompt: list[int], n: int) -> dict[str, float]:
        b, ctx, n_vocab = self.batch, self.ctx, self.model.n_vocab
        ll.llama_memory_clear(ll.llama_get_memory(ctx), True)
        for i, t in enumerate(prompt):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = t, i, 1, int(i == len(prompt) - 1)
            b.seq_id[i][0] = 0
        b.n_tokens = len(prompt)
        ll.llama_decode(ctx, b)
        tok = int(np.argmax(np.ctypeslib.as_array(ll.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))))
        b.n_tokens, b.n_seq_id[0], b.logits[0] = 1, 1, 1
        b.seq_id[0][0] = 0
        inside = inside_cpu = 0.0
        t0, c0 = time.perf_counter(), time.thread_time()
        for j in range(n):
            b.token[0], b.pos[0] = tok, len(prompt) + j
            t1, c1 = time.perf_counter(), time.thread_time()
            ll.llama_decode(ctx, b)
            if self.sync:
                ll.llama_synchronize(ctx)
            inside += time.perf_counter() - t1
            inside_cpu += time.thread_time() - c1
            row = np.ctypeslib.as_array(ll.llama_get_logits_ith(ctx, 0), shape=(n_vocab,)).copy()
            tok = int(np.argmax(row))
        total, total_cpu = time.perf_counter() - t0, time.thread_time() - c0
        return {"ms_per_token": 1000 * total / n, "decode_ms": 1000 * inside / n,
                "host_ms": 1000 * (total - inside) / n, "cpu_ms_per_token": 1000 * total_cpu / n,
                "host_cpu_ms": 1000 * (total_cpu - inside_cpu) / n}


def _run(eng: Engine, prompt: list[int], mode: str, sampling: SamplingParams, args: argparse.Namespace,
         ) -> dict[str, Any]:
    """One generation's figures from its stats (wall, and CPU time of the generating thread after the first token)."""
    params = GenerationParams(mode=Mode(mode), max_tokens=args.max_tokens, sampling=sampling, k=args.k,
                              fanout=args.fanout, budget=args.budget)
    before = _decodes(eng, mode)
    s = eng.generate(prompt, params).run().stats
    loop = max(s.seconds - s.ttft_s, 1e-9)
    # The prompt (shorter than a batch): one decode by the target, and one by an inline draft that read it ahead
    # on a thread of its own (without the read-ahead, the first round's sync reads it with the first token).
    prompt_reads = 1 + (Mode(mode).drafts_inline and eng.reads_ahead(params))
    return {"tokens": max(s.new_tokens - 1, 0), "loop_s": loop, "rounds": s.rounds, "drafted": s.drafted,
            "loop_decodes": _decodes(eng, mode) - before - prompt_reads if mode in COUNTED else None,
            "host_s": (s.python_share or 0.0) * loop, "loop_cpu_s": s.loop_cpu_s or 0.0,
            "host_cpu_s": s.host_cpu_s or 0.0,
            "tree_ms": s.mean_tree_ms, "acceptance": s.acceptance_rate, "hit_rate": s.hit_rate,
            "path": s.sampling_path, "rounds_by_mode": s.rounds_by_mode}


def _decodes(eng: Engine, mode: str) -> int:
    """Decodes so far by the models whose decodes ``mode`` runs on the generating thread."""
    n = eng.target_ctx.n_decodes
    return n + eng.drafter.ctx.n_decodes if Mode(mode).drafts_inline and eng.drafter is not None else n


def measure(target: Path, draft: Path, args: argparse.Namespace) -> tuple[dict[str, float], list[dict[str, Any]]]:
    floor_loop = BareLoop(target, args.gpu_layers)
    high = min(100_000, floor_loop.model.n_vocab)  # ordinary tokens of the pair's vocabulary (a test's is small)
    rng = np.random.default_rng(args.seed)
    prompts = [rng.integers(min(1000, high // 4), high, size=32).tolist() for _ in range(args.o_prompts)]
    bare: list[dict[str, float]] = []
    modes = [m for m in args.modes.split(",") if m in MODES]
    runs: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for path in args.paths.split(","):
        cfg = EngineConfig(str(target), str(draft), n_ctx=1024, threads=1, draft_threads=1, sampling_path=path,
                           gpu_layers=args.gpu_layers, draft_gpu_layers=args.draft_gpu_layers)
        with Engine(cfg) as eng:
            for warm in SETTINGS.values():  # warm-up: graphs, auto's cost model
                eng.generate(prompts[0], GenerationParams(mode=Mode.SD, max_tokens=16, sampling=warm)).run()
            eng.generate(prompts[0], GenerationParams(mode=Mode.AUTO, max_tokens=48)).run()
            for rep in range(args.repeats):
                for i, prompt in enumerate(prompts):
                    floor_loop.run(prompt, 8)  # warm
                    for setting, sampling in SETTINGS.items():
                        r = (i + rep) % len(modes)
                        for mode in modes[r:] + modes[:r]:
                            sp = SamplingParams(sampling.temperature, seed=args.seed + rep) if sampling.temperature \
                                else sampling
                            bare.append(floor_loop.run(prompt, args.max_tokens))  # its pair's floor, just before
                            run = _run(eng, prompt, mode, sp, args)
                            run["bare_ms"], run["bare_cpu_ms"] = bare[-1]["ms_per_token"], bare[-1]["cpu_ms_per_token"]
                            runs.setdefault((path, setting, mode), []).append(run)
    floor_loop.close()
    floor = {k: statistics.median(b[k] for b in bare) for k in bare[0]}
    table = []
    for (path, setting, mode), rs in runs.items():
        tokens, rounds = sum(r["tokens"] for r in rs), sum(r["rounds"] for r in rs)
        ms, cpu_ms = _per_run(rs, "loop_s", "tokens"), _per_run(rs, "loop_cpu_s", "tokens")
        host, host_cpu = _per_run(rs, "host_s", "rounds"), _per_run(rs, "host_cpu_s", "rounds")
        trees = [r["tree_ms"] for r in rs if r["tree_ms"] is not None]
        decodes = [r["loop_decodes"] for r in rs if r["loop_decodes"] is not None]
        per_round = sum(decodes) / max(rounds, 1) if len(decodes) == len(rs) else None
        acc = [r["acceptance"] for r in rs if r["acceptance"] is not None]
        table.append({"path": path, "setting": setting, "mode": mode, "ran": rs[-1]["path"], "ms_per_token": ms,
                      "vs_bare": _vs_bare(rs, "loop_s", "bare_ms"), "host_ms_per_round": host,
                      "cpu_ms_per_token": cpu_ms, "cpu_vs_bare": _vs_bare(rs, "loop_cpu_s", "bare_cpu_ms"),
                      "host_cpu_ms_per_round": host_cpu,
                      "decodes_per_round": per_round,
                      "floor_ms_per_round": per_round * floor["host_ms"] if per_round is not None else None,
                      "tokens_per_round": tokens / max(rounds, 1), "acceptance": statistics.mean(acc) if acc else None,
                      "tree_ms": statistics.mean(trees) if trees else None, "runs": rs})
    return floor, table


def _per_run(runs: list[dict[str, Any]], seconds: str, per: str) -> float:
    """Milliseconds of ``seconds`` per ``per`` (tokens, rounds): the median over the runs, the statistic the bare
    loop's floor is taken with. A run that meets a stall of the VM (one sampled ar run at 4.5 ms a token against
    1.8-2.4 for its five others, its host time doubled too) then moves neither side; a total over the runs counted
    it for the engine alone."""
    return float(statistics.median(1000 * r[seconds] / max(r[per], 1) for r in runs))


def _vs_bare(runs: list[dict[str, Any]], seconds: str, bare: str) -> float:
    """The engine over the bare loop: per run, its ms a token over the bare loop's run just before it on the same
    prompt, then the median. The VM's pace drifts by tens of percent over seconds (fixed ar greedy once read 2.24 ms
    a token and sampled 1.90 against one floor of 1.75, in one pass); a pair a fraction of a second long shares it."""
    return float(statistics.median(1000 * r[seconds] / max(r["tokens"], 1) / r[bare] for r in runs))


def verdicts(table: list[dict[str, Any]], k: int) -> list[str]:
    """The issue's must-show targets per path, on this thread's CPU time (load-independent) and on wall time."""
    row = {(t["path"], t["setting"], t["mode"]): t for t in table}
    out = []
    for path in sorted({t["path"] for t in table}):
        checks: list[tuple[str, str, str, str, float, str]] = [
            ("ar greedy vs bare", "greedy", "ar", "vs_bare", TARGETS["ar_greedy_x"], "x"),
            ("ar sampled vs bare", "sampled", "ar", "vs_bare", TARGETS["ar_sampled_x"], "x")]
        for mode in ("sd", "ssd"):
            checks.append((f"{mode} greedy host/round (K {k})", "greedy", mode, "host_ms_per_round",
                           TARGETS["host_round_greedy_ms"], " ms"))
            checks.append((f"{mode} sampled host/round (K {k})", "sampled", mode, "host_ms_per_round",
                           TARGETS["host_round_sampled_ms"], " ms"))
        for name, setting, mode, key, limit, unit in checks:
            t = row.get((path, setting, mode))
            if t is None:
                continue
            cpu_key = "cpu_vs_bare" if key == "vs_bare" else "host_cpu_ms_per_round"
            cpu, wall = float(t[cpu_key]), float(t[key])
            line = (f"[{path}] {name}: CPU {cpu:.2f}{unit}, wall {wall:.2f}{unit} (target <= {limit}{unit}): "
                    f"{'met' if cpu <= limit else 'NOT met'} on CPU time, "
                    f"{'met' if wall <= limit else 'not met'} on wall time")
            if key == "host_ms_per_round" and t.get("floor_ms_per_round") is not None:
                line += (f"; the bare loop's own host work for its {t['decodes_per_round']:.1f} decodes a round "
                         f"on this thread: {t['floor_ms_per_round']:.2f} ms")
            out.append(line)
    return out


def format_table(floor: dict[str, float], table: list[dict[str, Any]]) -> str:
    def f(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    lines = [f"bare loop (decode + row copy + argmax): {floor['ms_per_token']:.3f} ms/token wall "
             f"({floor['decode_ms']:.3f} in llama_decode, {floor['host_ms']:.3f} host); "
             f"CPU {floor['cpu_ms_per_token']:.3f} ms/token ({floor['host_cpu_ms']:.3f} host)",
             "times are medians over the runs, on both sides; x bare: the median of each run over the bare loop "
             "run just before it; "
             "columns: wall ms/token, x bare (wall), CPU ms/token of the generating thread, x bare (CPU), "
             "host ms/round outside llama_decode (wall, CPU), the bare loop's host ms for the decodes a round runs on "
             "the generating thread, tokens/round, acceptance, tree ms", ""]
    head = (f"{'path':8} {'setting':8} {'mode':7} {'ran':13} {'ms/tok':>7} {'x bare':>6} {'cpu/tok':>7} "
            f"{'x bare':>6} {'host/rnd':>8} {'cpu/rnd':>7} {'floor':>6} {'tok/rnd':>7} {'accept':>6} {'tree ms':>7}")
    lines += [head, "-" * len(head)]
    for t in sorted(table, key=lambda t: (t["path"], t["setting"], MODES.index(t["mode"]))):
        lines.append(f"{t['path']:8} {t['setting']:8} {t['mode']:7} {t['ran']:13} {t['ms_per_token']:7.3f} "
                     f"{t['vs_bare']:6.2f} {t['cpu_ms_per_token']:7.3f} {t['cpu_vs_bare']:6.2f} "
                     f"{t['host_ms_per_round']:8.3f} {t['host_cpu_ms_per_round']:7.3f} "
                     f"{f(t['floor_ms_per_round'], '6.3f')} {t['tokens_per_round']:7.2f} "
                     f"{f(t['acceptance'], '6.0%')} {f(t['tree_ms'], '7.2f')}")
    return "\n".join(lines)


def cmd_overhead(args: argparse.Namespace) -> int:
    args.repeats = args.repeats or O_REPEATS
    folder = Path(args.model_dir) if args.model_dir else user_data_dir() / "bench-overhead"
    if args.o_target and args.o_draft:  # another pair through the same measurement (the synthetic GPU pair)
        target, draft, vocab = Path(args.o_target), Path(args.o_draft), "the pair's own"
    else:
        target, draft, vocab = tiny_pair(folder)
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    load0 = os.getloadavg()[0]
    floor, table = measure(target, draft, args)
    text = format_table(floor, table)
    checks = verdicts(table, args.k)
    load = f"load average {load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end, {os.cpu_count()} CPUs"
    report = "\n".join([text, "", *checks, "", load])
    print(report)
    from .common import machine

    default = os.path.join("results", "bench.json")
    out = Path(os.path.join("results", "bench-O.json") if args.out == default else args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"command": "python -m engine " + " ".join(sys.argv[1:]), "started": started, "machine": machine(),
              "load": load, "vocabulary": vocab, "n_vocab": Model(target, vocab_only=True).n_vocab,
              "models": {"target": str(target), "draft": str(draft), "gpu_layers": args.gpu_layers,
                         "draft_gpu_layers": args.draft_gpu_layers},
              "settings": {"max_tokens": args.max_tokens, "k": args.k, "fanout": args.fanout, "budget": args.budget,
                           "repeats": args.repeats, "prompts": args.o_prompts,
                           "sampled": {"temperature": 0.8, "top_k": SETTINGS["sampled"].top_k,
                                       "top_p": SETTINGS["sampled"].top_p, "min_p": SETTINGS["sampled"].min_p}},
              "bare_loop": floor, "table": table, "targets": checks}
    out.write_text(json.dumps(result, indent=1))
    out.with_suffix(".txt").write_text(report + "\n")
    print(f"wrote {out} and {out.with_suffix('.txt')}")
    return 0


O_REPEATS = 3  # --repeats when not given
