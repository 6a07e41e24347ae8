"""``python -m engine bench --scenarios A,B,C``: ar, sd, ssd, lookup and auto on the real pair in the hardware
scenarios of :mod:`.common`. The table, the per-prompt ratios (:mod:`.ratios`) and a JSON file with every figure are
written; ``--peer DIR`` adds llama.cpp's tools.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from engine.core.options import MODES, cpu_cores
from engine.core.sampling import SamplingParams
from engine.engine import Engine, EngineConfig
from engine.errors import EngineError
from engine.models import offline
from engine.models.convert import ensure_f16

from .common import Row, load_prompts, machine, run_scenario, scenarios
from .peer import run_peer
from .ratios import per_prompt, print_ratios, summary
from .table import print_table, summarise

REPEATS = 1  # --repeats when not given


def cmd_pair(args: argparse.Namespace) -> int:
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
