"""Bench F: first replies from fresh planner memory, auto against ar, where issue 63 measured auto losing.

Two cases, each reply on a new engine that neither reads nor keeps a planner memory (ar's reply must not teach auto
the machine), the order of auto and ar alternating from trial to trial:

- *link*: the real pair's target on one RPC server here behind a proxy adding the last of ``--delays`` each way
  (25 ms by default), the draft and the output layer here, one thread each; scenario R's low-acceptance chat
  prompt, ``--max-tokens`` greedy tokens (64 in the issue).
- *structured*: the target and draft here on every core; a reply held to a JSON Schema, greedy, at most
  STRUCTURED_TOKENS tokens.

A reply's rate counts its prompt's read (what a user waits for); "same" says auto's tokens are ar's.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine import Engine, EngineConfig, GenerationParams, offline
from engine.core.jsonschema import schema_grammar
from engine.core.mode import Mode
from engine.core.sampling import SamplingParams

from .remote import CHAT_LOW
from .remote_link import proxies, servers

BAR = 0.95  # issue 63's: a first reply under auto at least this share of ar's
TRIALS = 6  # auto/ar pairs per case: the host's pace drifts by tens of percent, one pair settles nothing
STRUCTURED_TOKENS = 128
SCHEMA = {"type": "object", "required": ["name", "language", "year", "features"],
          "properties": {"name": {"type": "string"}, "language": {"type": "string"}, "year": {"type": "integer"},
                         "features": {"type": "array", "items": {"type": "string"}}}}
STRUCTURED_PROMPT = ("Describe the Python programming language as JSON: name, language family, first release year "
                     "and five key features.")


def _reply(cfg: EngineConfig, prompt: str, mode: Mode, max_tokens: int, grammar: str = "") -> dict[str, Any]:
    with Engine(cfg) as eng:
        gen = eng.generate(eng.chat_tokens(prompt), GenerationParams(
            mode=mode, max_tokens=max_tokens, sampling=SamplingParams(temperature=0.0, grammar=grammar))).run()
    s = gen.stats
    return {"mode": mode.value, "tok_s": s.tokens_per_second, "tokens": list(gen.tokens),
            "by_mode": {str(k): v for k, v in s.tokens_by_mode.items()}}


def _trials(case: str, run: Callable[[Mode], dict[str, Any]], trials: int) -> list[dict[str, Any]]:
    rows = []
    for t in range(trials):
        order = (Mode.AUTO, Mode.AR) if t % 2 == 0 else (Mode.AR, Mode.AUTO)
        got = {m: run(m) for m in order}
        auto, ar = got[Mode.AUTO], got[Mode.AR]
        row = {"case": case, "trial": t, "order": [m.value for m in order], "auto_tok_s": auto["tok_s"],
               "ar_tok_s": ar["tok_s"], "ratio": auto["tok_s"] / ar["tok_s"], "same": auto["tokens"] == ar["tokens"],
               "auto_tokens_by_mode": auto["by_mode"]}
        print(f"F {case} trial {t} ({row['order'][0]} first): auto {row['auto_tok_s']:.2f} ar {row['ar_tok_s']:.2f} "
              f"tok/s, {row['ratio']:.3f}x, auto's tokens by mode {row['auto_tokens_by_mode']}", flush=True)
        rows.append(row)
    return rows


def cmd_first(args: argparse.Namespace) -> int:
    if args.target and args.draft:
        target, draft = str(args.target), str(args.draft)
    else:
        pair = offline.ensure_pair()
        target, draft = str(pair.target), str(pair.draft)
    trials = args.repeats or TRIALS
    delay = float(args.delays.split(",")[-1])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as logs, servers(1, Path(logs)) as ports, proxies(ports, delay) as links:
        link = EngineConfig(target, draft, n_ctx=1024, threads=1, draft_threads=1,
                            rpc=tuple(p.endpoint for p in links), tensor_split=(1.0,))
        rows += _trials(f"link {delay:g} ms", lambda m: _reply(link, CHAT_LOW["prompt"], m, args.max_tokens), trials)
    local = EngineConfig(target, draft, n_ctx=1024, threads=args.threads)
    grammar = schema_grammar(SCHEMA)
    rows += _trials("structured", lambda m: _reply(local, STRUCTURED_PROMPT, m, STRUCTURED_TOKENS, grammar), trials)
    print(f"{'case':16} {'auto / ar, mean':>16} {'lowest':>7} {'below 0.95':>10} {'same tokens':>11}")
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == case]
        ratios, same = [r["ratio"] for r in mine], sum(r["same"] for r in mine)
        print(f"{case:16} {sum(ratios) / len(ratios):16.3f} {min(ratios):7.3f} "
              f"{sum(x < BAR for x in ratios):>5} of {len(ratios):<2} {same:>5} of {len(mine)}")
    out.write_text(json.dumps({"bench": "F", "target": target, "draft": draft, "trials": rows}, indent=1),
                   encoding="utf-8")
    print(f"wrote {out}")
    return 0
