"""Bench scenario ``H`` (recurrent and hybrid): speculation against ar on tiny models whose memory keeps a state.

``python -m engine bench --scenarios H`` writes three tiny pairs (engine/tiny/recurrent.py; a related draft
is its target's weights perturbed, as the tests' pairs are):

- ``lfm2+lfm2``: a hybrid target and draft; llama.cpp rolls the verify's rejected tail back (``n_rs_seq``);
- ``mamba+mamba``: a recurrent target and draft; a round whose draft was rejected goes back to its checkpoint
  and decodes the accepted tokens again;
- ``lfm2+llama``: the hybrid target with an attention-only draft of the same vocabulary (valid; its weights
  are unrelated, so little is accepted).

A draft as large as its target cannot pay on a CPU: these pairs measure what going back costs per round, not
the speed-up of a real pair (a shallower draft of the same seed shares too little with its target to be
accepted, and llama.cpp cannot load an lfm2 without an attention layer).

Each of the bench prompts runs every mode back to back (order rotated per prompt, greedy). Per pair and mode:
decode tok/s and its ratio to ar's, acceptance, the mean verify per round and, of it, the checkpoint's cost per
round (``GenerationStats.mean_restore_ms``: the checkpoint, the restore and the accepted tokens decoded again),
and whether every reply is ar's. The table and a JSON file go to ``results/``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.core.mode import Mode
from engine.core.options import MODES
from engine.core.paths import user_data_dir
from engine.engine import Engine, EngineConfig, GenerationParams
from engine.errors import EngineError
from engine.tiny.models import write_model
from engine.tiny.recurrent import write_lfm2, write_mamba

SHAPE = {"n_layer": 4, "n_embd": 256}  # a decode of a few milliseconds on a CPU core: the round's costs show
NOISE = 0.02  # the related drafts' perturbation: about half of their tokens accepted at K 4
DEFAULT_PROMPTS = 4
H_MODES = ("ar", "sd", "ssd", "auto")
WRITERS: dict[str, Callable[..., Path]] = {"lfm2": write_lfm2, "mamba": write_mamba, "llama": write_model}
PAIRS = {"lfm2+lfm2": ("lfm2", "lfm2"), "mamba+mamba": ("mamba", "mamba"), "lfm2+llama": ("lfm2", "llama")}


def write_pairs(folder: Path, shape: dict[str, int] | None = None) -> dict[str, tuple[Path, Path]]:
    """The tiny pairs of :data:`PAIRS`, written once into ``folder`` (then reused): a draft of its target's
    architecture is the target perturbed by :data:`NOISE`; one of another architecture has weights of its own."""
    shape = shape or SHAPE
    folder.mkdir(parents=True, exist_ok=True)
    tag = "-".join(f"{k}{v}" for k, v in sorted(shape.items()))

    def model(arch: str, role: str, **kw: Any) -> Path:
        path = folder / f"h-{arch}-{role}-{tag}-noise{NOISE}.gguf"
        if not path.exists():
            peaked: dict[str, Any] = {"logit_scale": 6.0} if arch == "llama" else {}  # the recurrent writers' default
            WRITERS[arch](path, **shape, **peaked, **kw)
        return path

    out = {}
    for name, (t_arch, d_arch) in PAIRS.items():
        draft = model(d_arch, "related", seed=1, noise=NOISE) if d_arch == t_arch else model(d_arch, "other", seed=2)
        out[name] = (model(t_arch, "target", seed=1), draft)
    return out


def _run(eng: Engine, prompt: list[int], mode: str, args: argparse.Namespace) -> dict[str, Any]:
    params = GenerationParams(mode=Mode(mode), k=args.k, fanout=args.fanout, max_tokens=args.max_tokens)
    gen = eng.generate(prompt, params).run()
    s = gen.stats
    decode_s = max(s.seconds - s.ttft_s, 1e-9)
    return {"tokens": list(gen.tokens), "decode_tokens": max(s.new_tokens - 1, 0), "decode_s": decode_s,
            "rounds": s.rounds, "acceptance_rate": s.acceptance_rate, "mean_verify_ms": s.mean_verify_ms,
            "mean_restore_ms": s.mean_restore_ms, "rounds_by_mode": dict(s.rounds_by_mode)}


def run_pairs(pairs: dict[str, tuple[Path, Path]], prompts: list[str], modes: list[str],
              args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every pair, prompt and mode (rotated per prompt, ``args.repeats`` passes): one row per pair and mode."""
    rows = []
    for name, (target, draft) in pairs.items():
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
        config = EngineConfig(str(target), str(draft), n_ctx=args.ctx, threads=1, draft_threads=1)
        with Engine(config) as eng:
            for i, text in enumerate(prompts * args.repeats):
                prompt = eng.chat_tokens(text)
                order = modes[i % len(modes):] + modes[: i % len(modes)]
                for mode in order:
                    runs[mode].append(_run(eng, prompt, mode, args) | {"prompt": i % len(prompts)})
        rows += [_row(name, mode, runs, modes) for mode in modes]
    return rows


def _mean(runs: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in runs if r.get(key) is not None]
    return sum(vals) / len(vals) if vals else None


def _row(pair: str, mode: str, runs: dict[str, list[dict[str, Any]]], modes: list[str]) -> dict[str, Any]:
    mine = runs[mode]
    tps = sum(r["decode_tokens"] for r in mine) / sum(r["decode_s"] for r in mine)
    ar = runs.get("ar")
    ar_tps = sum(r["decode_tokens"] for r in ar) / sum(r["decode_s"] for r in ar) if ar else None
    same = [r["tokens"] == a["tokens"] for r, a in zip(mine, ar, strict=True)] if ar else []
    rounds = sum(r["rounds"] for r in mine)
    verify = sum(r["mean_verify_ms"] * r["rounds"] for r in mine) / rounds if rounds else None
    restore = sum((r["mean_restore_ms"] or 0.0) * r["rounds"] for r in mine) / rounds if rounds else None
    return {"pair": pair, "mode": mode, "tokens_per_second": tps, "speedup_vs_ar": tps / ar_tps if ar_tps else None,
            "acceptance_rate": _mean(mine, "acceptance_rate"), "mean_verify_ms": verify,
            "mean_restore_ms": restore if restore else None,
            "restore_share": restore / verify if restore and verify else None, "rounds": rounds,
            "exact_vs_ar": f"{sum(same)}/{len(same)}" if same else None}


def print_rows(rows: list[dict[str, Any]]) -> None:
    def f(v: Any, fmt: str) -> str:
        return format(v, fmt) if v is not None else "-".rjust(int(fmt.rstrip("f%").split(".")[0]))

    head = (f"{'pair':12} {'mode':5} {'tok/s':>8} {'vs ar':>6} {'accept':>7} {'verify ms':>10} "
            f"{'restore ms':>11} {'of verify':>10} {'exact':>6}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['pair']:12} {r['mode']:5} {r['tokens_per_second']:8.1f} {f(r['speedup_vs_ar'], '6.2f')} "
              f"{f(r['acceptance_rate'], '7.0%')} {f(r['mean_verify_ms'], '10.3f')} "
              f"{f(r['mean_restore_ms'], '11.3f')} {f(r['restore_share'], '10.0%')} {r['exact_vs_ar'] or '-':>6}")


def unknown_mode(mode: str) -> str:
    return f"unknown mode {mode!r} (use {', '.join(MODES)})"


def cmd_recurrent(args: argparse.Namespace) -> int:
    """``bench --scenarios H``."""
    from .common import load_prompts

    given = args.modes != ",".join(MODES)  # bench's default, every mode: here H_MODES (lookup drafts no model)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()] if given else list(H_MODES)
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise EngineError(unknown_mode(unknown[0]))
    args.repeats = args.repeats or 1
    folder = Path(args.model_dir) if args.model_dir else user_data_dir() / "bench-models"
    prompts = [p["prompt"] for p in load_prompts(args.prompts or DEFAULT_PROMPTS)]
    rows = run_pairs(write_pairs(folder), prompts, modes, args)
    print_rows(rows)
    out = Path(args.out).with_name("bench_recurrent.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"shape": SHAPE, "noise": NOISE, "max_tokens": args.max_tokens, "k": args.k,
                               "prompts": len(prompts), "repeats": args.repeats, "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0
