"""Constrained replies with and without the draft constrained too: acceptance and speed per mode.

``python -m engine.bench.constrained --target T.gguf --draft D.gguf`` asks each prompt for a JSON reply (a
schema, through the model's chat template) in ar and in each drafting mode, once with the draft drafting under the
same constraint as the target and once drafting freely, checks every reply equals ar's (greedy; ar runs once first
so that every compared run reads the prompt from the cache), and prints acceptance and tokens per second.
"""

from __future__ import annotations

import argparse
import json
import time

from engine import Engine, EngineConfig, GenerationParams, SamplingParams
from engine.core.jsonschema import schema_grammar
from engine.core.mode import Mode

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["name", "language", "lines", "summary"],
          "properties": {"name": {"type": "string"}, "language": {"enum": ["python", "rust", "go", "c"]},
                         "lines": {"type": "integer"}, "summary": {"type": "string"}}}
PROMPTS = (
    "Describe a Python function that reverses a linked list, as JSON with name, language, lines and summary.",
    "Describe a Rust program that counts words in a file, as JSON with name, language, lines and summary.",
    "Describe a Go HTTP server that serves static files, as JSON with name, language, lines and summary.",
    "Describe a C function that parses an integer, as JSON with name, language, lines and summary.",
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m engine.bench.constrained", description=__doc__)
    p.add_argument("--target", required=True)
    p.add_argument("--draft", required=True)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--modes", default="sd,ssd,auto")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--prompts", type=int, default=len(PROMPTS))
    args = p.parse_args(argv)
    sampling = SamplingParams(grammar=schema_grammar(SCHEMA))
    cfg = EngineConfig(args.target, args.draft, n_ctx=2048, threads=args.threads, draft_threads=args.threads)
    with Engine(cfg) as eng:
        assert eng.drafter is not None
        rows: dict[tuple[str, bool], list[tuple[int, int, int, float]]] = {}
        for prompt in PROMPTS[: args.prompts]:
            toks = eng.messages_tokens([{"role": "user", "content": prompt}])
            ar = GenerationParams(mode=Mode.AR, max_tokens=args.max_tokens, sampling=sampling)
            eng.generate(toks, ar).run()  # every later run reuses the prompt's cache: its rows are computed alike
            ref = eng.generate(toks, ar).run()
            rows.setdefault(("ar", True), []).append((0, 0, len(ref.tokens), ref.stats.seconds))
            for mode in args.modes.split(","):
                for mirror in (True, False):
                    eng.drafter.mirror_constraints = mirror
                    t0 = time.perf_counter()
                    got = eng.generate(toks, GenerationParams(mode=mode, max_tokens=args.max_tokens,
                                                              sampling=sampling)).run()
                    if got.tokens != ref.tokens:
                        raise SystemExit(f"{mode} (draft constrained: {mirror}) differs from ar")
                    st = got.stats
                    rows.setdefault((mode, mirror), []).append((st.drafted, st.accepted, len(got.tokens),
                                                                time.perf_counter() - t0))
            eng.drafter.mirror_constraints = True
            print(f"# {json.dumps(eng.detokenize(ref.tokens))[:100]}")
        print("| mode | draft constrained | drafted | accepted | acceptance | tok/s |")
        print("|---|---|---|---|---|---|")
        for (mode, mirror), vals in rows.items():
            d, a = sum(v[0] for v in vals), sum(v[1] for v in vals)
            n, s = sum(v[2] for v in vals), sum(v[3] for v in vals)
            shown = "—" if mode == "ar" else ("yes" if mirror else "no")
            print(f"| {mode} | {shown} | {d} | {a} | {a / d if d else 0:.2f} | {n / s:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
