"""The bench's per-prompt comparison: auto against the best fixed mode, lookup against ar.

What issue 13 asks of auto and lookup is per prompt and per (scenario, setting): auto's decode tok/s over
the best fixed mode's on the same prompt (geometric mean and lowest), lookup's over ar's. Computed from the
bench's per-prompt runs; ``python -m engine.bench.ratios results/bench-X.json`` prints it again from a
saved file. auto / best is also worked out for each pass over the modes alone (the bench repeats every prompt,
each pass running every mode once, back to back): where the passes disagree, the machine moved more than the
ratio's margin. Each fixed mode is given the same ratio (its tok/s over the best fixed mode's, per prompt): where
two fixed modes run alike (ar and a lookup that drafts nothing), noise alone makes one of them the best of each
prompt, so even the steadiest fixed mode reads below 1 — the yardstick auto's ratio is read against.

"The best fixed mode" is read two ways. Per prompt, it is whichever fixed mode ran fastest on that prompt: an
oracle that picks a mode per prompt after the fact, and the maximum of several noisy runs, so it sits above every
mode's own rate on average. Per row (scenario and setting), it is the one fixed mode a user would set for this
machine: the fixed mode with the highest geometric mean of tok/s over the row's prompts, and auto is compared with
it prompt by prompt. Both are printed and kept.
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

FIXED = ("ar", "sd", "ssd", "lookup")


def per_prompt(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (scenario, setting, prompt): decode tok/s by mode and the two ratios (None if a mode is absent).

    ``groups`` is the bench JSON's ``runs``: one entry per (scenario, setting, mode) holding per-prompt runs
    (llama.cpp's tools, modes ``peer:...``, are left out)."""
    runs: dict[tuple[str, str, str], dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for g in (g for g in groups if not g["mode"].startswith("peer")):
        for run in g["runs"]:
            runs[(g["scenario"], g["setting"], run["prompt"])][g["mode"]].append(run)
    rates = {key: {mode: _rate(rs) for mode, rs in by_mode.items()} for key, by_mode in runs.items()}
    out = []
    for (scenario, setting, prompt), tps in rates.items():
        out.append({
            "scenario": scenario, "setting": setting, "prompt": prompt, "tokens_per_second": tps,
            "best_fixed": _best_fixed(tps), "auto_vs_best": _auto_vs_best(tps), "fixed_vs_best": _fixed_vs_best(tps),
            "lookup_vs_ar": tps["lookup"] / tps["ar"] if "lookup" in tps and tps.get("ar") else None,
            "auto_vs_best_by_pass": _by_pass(runs[(scenario, setting, prompt)]),
        })
    return out


def _by_pass(by_mode: dict[str, list[dict[str, Any]]]) -> list[float | None]:
    """auto / the best fixed mode within each pass (the i-th run of every mode ran in the i-th pass); None for a
    pass where no fixed mode decoded a token."""
    if "auto" not in by_mode or not any(m in FIXED for m in by_mode):
        return []
    passes = min(len(rs) for rs in by_mode.values())
    return [_auto_vs_best({m: _rate([rs[i]]) for m, rs in by_mode.items()}) for i in range(passes)]


def _best_fixed(tps: dict[str, float]) -> str | None:
    """The fixed mode with the most decode tok/s (None when no fixed mode ran)."""
    fixed = [m for m in tps if m in FIXED]
    return max(fixed, key=tps.__getitem__) if fixed else None


def _vs_best(tps: dict[str, float]) -> dict[str, float]:
    """Each mode's tok/s over the best fixed mode's (empty when no fixed mode decoded a token)."""
    best = _best_fixed(tps)
    return {m: t / tps[best] for m, t in tps.items()} if best and tps[best] > 0 else {}


def _auto_vs_best(tps: dict[str, float]) -> float | None:
    """auto's tok/s over the best fixed mode's (None without auto, or when no fixed mode decoded a token)."""
    return _vs_best(tps).get("auto")


def _fixed_vs_best(tps: dict[str, float]) -> dict[str, float]:
    """Each fixed mode's tok/s over the best fixed mode's (empty when no fixed mode decoded a token)."""
    ratios = _vs_best(tps)
    return {m: ratios[m] for m in FIXED if m in ratios}


def _rate(runs: list[dict[str, Any]]) -> float:
    """Decode tok/s over a prompt's repeats: their decode tokens over their decode seconds (as the table's rows)."""
    seconds = sum(float(r["decode_s"] or 0.0) for r in runs)
    return sum(float(r["decode_tokens"]) for r in runs) / seconds if seconds > 0 else 0.0


def _geomean(xs: list[float]) -> float:
    """The geometric mean; 0 if a ratio is 0 (a run that decoded nothing)."""
    return 0.0 if min(xs) <= 0 else math.exp(sum(math.log(x) for x in xs) / len(xs))


def summary(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (scenario, setting): geometric mean and lowest of each ratio over the prompts."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in entries:
        groups[(e["scenario"], e["setting"])].append(e)
    out = []
    for (scenario, setting), es in groups.items():
        row: dict[str, Any] = {"scenario": scenario, "setting": setting, "prompts": len(es)}
        for key in ("auto_vs_best", "lookup_vs_ar"):
            xs = [e[key] for e in es if e[key] is not None]
            row[key] = {"geomean": _geomean(xs), "lowest": min(xs)} if xs else None
        fixed = {m: [e["fixed_vs_best"][m] for e in es if m in e["fixed_vs_best"]] for m in FIXED}
        row["fixed_vs_best"] = {m: _geomean(xs) for m, xs in fixed.items() if xs}
        row["best_mode"], row["auto_vs_best_mode"] = _against_best_mode(es)
        passes = min((len(e["auto_vs_best_by_pass"]) for e in es), default=0)
        by_pass = [[r for e in es if (r := e["auto_vs_best_by_pass"][i]) is not None] for i in range(passes)]
        row["auto_vs_best_by_pass"] = [{"geomean": _geomean(xs), "lowest": min(xs)} if xs else None for xs in by_pass]
        out.append(row)
    return out


def _against_best_mode(entries: list[dict[str, Any]]) -> tuple[str | None, dict[str, float] | None]:
    """The row's best fixed mode (the highest geometric mean of tok/s over the prompts, among the fixed modes that
    ran on every prompt), and auto over it prompt by prompt: geometric mean and lowest (None without auto)."""
    tps = [e["tokens_per_second"] for e in entries]
    everywhere = [m for m in FIXED if all(t.get(m, 0.0) > 0 for t in tps)]
    if not everywhere:
        return None, None
    best = max(everywhere, key=lambda m: _geomean([t[m] for t in tps]))
    if not all("auto" in t for t in tps):
        return best, None
    xs = [t["auto"] / t[best] for t in tps]
    return best, {"geomean": _geomean(xs), "lowest": min(xs)}


def print_ratios(entries: list[dict[str, Any]]) -> None:
    modes = [m for m in (*FIXED, "auto") if any(m in e["tokens_per_second"] for e in entries)]

    def f(v: float | None) -> str:
        return "     -" if v is None else f"{v:6.2f}"

    print("\nPer prompt (decode tok/s; auto / the best fixed mode on that prompt; lookup / ar):")
    for s in summary(entries):
        print(f"== {s['scenario']} {s['setting']}")
        head = " ".join(f"{m:>7}" for m in modes)
        print(f"{'prompt':12} {head} {'best':>7} {'auto/best':>9} {'lookup/ar':>9}  auto/best by pass")
        for e in entries:
            if (e["scenario"], e["setting"]) != (s["scenario"], s["setting"]):
                continue
            tps = e["tokens_per_second"]
            print(f"{e['prompt']:12} " + " ".join(f"{tps[m]:7.2f}" if m in tps else "      -" for m in modes)
                  + f" {e['best_fixed'] or '-':>7}    {f(e['auto_vs_best'])}    {f(e['lookup_vs_ar'])}  "
                  + " ".join("-" if r is None else f"{r:.2f}" for r in e["auto_vs_best_by_pass"]))
        for key, name in (("auto_vs_best", "auto / best fixed"), ("lookup_vs_ar", "lookup / ar")):
            if s[key]:
                print(f"  {name}: geometric mean {s[key]['geomean']:.2f}, lowest {s[key]['lowest']:.2f}")
        if s["auto_vs_best_mode"]:
            r = s["auto_vs_best_mode"]
            print(f"  auto / the row's best fixed mode ({s['best_mode']}, on every prompt): geometric mean "
                  f"{r['geomean']:.2f}, lowest {r['lowest']:.2f}")
        if s["fixed_vs_best"]:
            print("  each fixed mode / best fixed, geometric mean: "
                  + ", ".join(f"{m} {r:.2f}" for m, r in s["fixed_vs_best"].items()))
        passes = s["auto_vs_best_by_pass"]
        if len(passes) > 1:
            print("  auto / best fixed, each pass alone: " + "; ".join(
                "-" if r is None else f"geometric mean {r['geomean']:.2f}, lowest {r['lowest']:.2f}" for r in passes))


USAGE = "usage: python -m engine.bench.ratios BENCH.json"


def main(argv: list[str]) -> int:
    """Print auto's ratios to the fixed modes from a bench result file."""
    if argv in (["-h"], ["--help"]):
        print(f"{USAGE}\n\n{main.__doc__}")
        return 0
    if len(argv) != 1:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        data = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
        entries = per_prompt(data["runs"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: cannot read {argv[0]} as a bench result: {exc}", file=sys.stderr)
        return 2
    print_ratios(entries)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
