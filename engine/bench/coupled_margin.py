"""Where a prompt's coupled replies differ between modes: the first differing position, the gap between the target's
two best perturbed scores there, and how far a batched decode's logits row lies from a single token's.

One seed gives one reply in every mode as long as every mode's target row picks the same perturbed best. A
batch and a single token round differently (the CPU's K-quant kernels change with the batch's width), so where
the two best perturbed scores lie within that rounding the modes may part: the bench names those places.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from engine.core.gumbel import COUPLED, score_margin
from engine.core.kvtrack import KVTrack
from engine.core.ranks import FloatRow
from engine.core.sampling import SamplingParams
from engine.engine import Engine, EngineConfig

from .common import Row


def _first_difference(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def coupled_replies(rows: list[Row]) -> dict[str, dict[str, list[int]]]:
    """Prompt id -> mode -> tokens of the coupled runs."""
    replies: dict[str, dict[str, list[int]]] = {}
    for row in rows:
        if row.setting == COUPLED:
            for run in row.runs:
                replies.setdefault(run["prompt"], {})[row.mode] = list(run["tokens"])
    return replies


def one_reply(by_mode: dict[str, list[int]]) -> bool:
    """Whether every mode gave the same tokens."""
    return len({tuple(t) for t in by_mode.values()}) == 1


def split_replies(rows: list[Row]) -> dict[str, dict[str, list[int]]]:
    """:func:`coupled_replies` of the prompts whose coupled replies are not one token list in every mode."""
    return {p: r for p, r in coupled_replies(rows).items() if not one_reply(r)}


def _row_after(kv: KVTrack, prompt: list[int], reply: list[int], width: int) -> FloatRow:
    """The logits row after ``prompt`` (one prefill, as in every mode) and ``reply`` decoded ``width`` at a time."""
    kv.reset()
    row: FloatRow = kv.sync(prompt)
    for i in range(0, len(reply), width):
        chunk, start = reply[i : i + width], len(kv.tokens)
        row = kv.ctx.decode_out(chunk, list(range(start, start + len(chunk))), 0, [len(chunk) - 1]).row(0).copy()
        kv.tokens.extend(chunk)
    return row


def divergences(target: Path, threads: int, n_ctx: int, prompts: list[dict[str, str]], rows: list[Row],
                params: SamplingParams, verify_width: int) -> list[dict[str, Any]]:
    """One record per prompt whose coupled replies differ: the modes, the first differing position, the perturbed
    top-2 gap of ar's row there, and the largest difference between that row and the one the reply decoded in
    batches of ``verify_width`` (a verify's width) gives, which also differs in every KV entry it wrote."""
    split = split_replies(rows)
    if not split:
        return []
    text = {p["id"]: p["prompt"] for p in prompts}
    out: list[dict[str, Any]] = []
    with Engine(EngineConfig(str(target), n_ctx=n_ctx, threads=threads, draft_threads=threads)) as eng:
        kv = eng.target.kv
        eng.target_ctx.set_sampling(None)  # logits rows
        for pid, by_mode in split.items():
            modes = sorted(by_mode)
            ref = by_mode[modes[0]]
            at = min(_first_difference(ref, t) for t in by_mode.values() if t != ref)
            if at == 0:  # the first token comes from the prompt's prefill in every mode
                continue
            prompt = eng.chat_tokens(text[pid])
            single = _row_after(kv, prompt, ref[:at], 1)  # ar's way: one token a decode
            batched = _row_after(kv, prompt, ref[:at], verify_width)  # a verify's way: batches of k + 1
            out.append({"prompt": pid, "modes": {m: by_mode[m][at] for m in modes}, "position": at,
                        "top2_gap": score_margin(single, params, len(prompt) + at),
                        "batch_vs_single": float(np.max(np.abs(batched - single)))})
    return out
