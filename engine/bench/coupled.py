"""``python -m engine.bench.coupled``: rejection against coupled sampling for sd, ssd and auto on the real pair.

Each prompt runs every mode under both schemes back to back (the order rotated per pass, as in
:mod:`engine.bench.common`); sampled at temperature 0.7, top-p 0.9, one seed. A row gives tok/s after the first token,
acceptance, ssd's hit rate, and for coupled how many prompts gave one reply in every mode run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from engine.core.gumbel import COUPLED, REJECTION
from engine.core.options import cpu_cores
from engine.core.sampling import SamplingParams
from engine.models import offline
from engine.models.convert import ensure_f16

from .common import Row, load_prompts, machine, run_scenario, scenarios
from .coupled_margin import coupled_replies, divergences, one_reply

MODES = ["sd", "ssd", "auto"]


def _same_reply(rows: list[Row]) -> tuple[int, int]:
    """Prompts whose coupled replies are one token list in every mode, of the prompts run."""
    replies = coupled_replies(rows)
    return sum(one_reply(r) for r in replies.values()), len(replies)


def _line(row: Row) -> dict[str, Any]:
    return {"scenario": row.scenario, "scheme": row.setting, "mode": row.mode, "tok_s": round(row.tps, 2),
            "acceptance": row.mean("acceptance_rate"), "hit_rate": row.mean("hit_rate"), "runs": len(row.runs)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--scenarios", default="A,B,C", help="comma list of A, B (F16 target only), C")
    p.add_argument("--prompts", type=int, default=4, help="the first N prompts of the bench set")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default="results/bench_coupled.json")
    args = p.parse_args(argv)
    args.k, args.fanout, args.budget, args.geometric, args.ctx, args.repeats = 4, 1, 1, False, 2048, 1  # bench's
    args.rpc, args.tensor_split = (), ()  # local machine only
    pair = offline.ensure_pair()
    names = [s.strip().upper() for s in args.scenarios.split(",") if s.strip()]
    f16 = ensure_f16(pair.target) if any(n in ("B", "C") for n in names) else None
    scs = [s for s in scenarios(names, pair.target, cpu_cores(), f16) if s.name != "B-q4"]  # in the order asked
    prompts = load_prompts(args.prompts)
    settings = {scheme: SamplingParams(temperature=0.7, top_p=0.9, seed=args.seed, scheme=scheme)
                for scheme in (REJECTION, COUPLED)}
    lines: list[dict[str, Any]] = []
    same: dict[str, tuple[int, int]] = {}
    runs: list[dict[str, Any]] = []
    parted: dict[str, list[dict[str, Any]]] = {}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tqdm(total=len(scs) * len(prompts) * 2 * len(MODES), file=sys.stderr, unit="run") as bar:
        for sc in scs:  # the file is written after each scenario: a long run cut short keeps what it measured
            rows, _ = run_scenario(sc, pair.draft, prompts, MODES, settings, args, bar)
            lines += [_line(r) for r in rows]
            same[sc.name] = _same_reply(rows)
            runs += [{"scenario": r.scenario, "scheme": r.setting, "mode": r.mode, "runs": r.runs} for r in rows]
            parted[sc.name] = divergences(sc.target, sc.threads, args.ctx, prompts, rows, settings[COUPLED],
                                      args.k + 1)
            out.write_text(json.dumps({"machine": machine(), "settings": vars(args), "rows": lines, "same": same,
                                       "runs": runs, "parted": parted}, indent=1))
    for line in lines:
        print(json.dumps(line))
    print(json.dumps({"coupled_one_reply_in_every_mode": same, "where_modes_part": parted}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
