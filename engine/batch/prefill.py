"""A prompt read beside running replies: one chunk per hold of the context, so their rounds go on in between."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from engine.core.sampling import SamplingParams
from engine.speculative.target import Target

from .slots import Slots


def read_prompt(slots: Slots, target: Target, prompt: Sequence[int], params: SamplingParams,
                rng: np.random.Generator, stop: Callable[[], bool], threads: int) -> int | None:
    """Prefill ``prompt`` on ``target``'s sequence (reusing its exact prefix) and sample the first token, taking
    the context for one chunk at a time on ``threads`` CPU threads; None when ``stop`` turns true between chunks."""
    target.prepare(prompt, params, rng)
    kv, ctx, n = target.kv, target.ctx, len(prompt)
    keep = slots.run(lambda: kv.begin(target.committed))
    step = kv.step
    for i in range(keep, n, step):
        if stop():
            return None
        chunk = target.committed[i : i + step]
        last = i + step >= n

        def read(chunk: list[int] = chunk, i: int = i, last: bool = last) -> int | None:
            ctx.set_threads(threads, threads)
            out = ctx.decode_out(chunk, range(i, i + len(chunk)), target.seq, [len(chunk) - 1] if last else [])
            kv.read(chunk)
            if not last:
                return None
            kv.synced = n - keep
            return target.first(out)

        if last:
            return slots.run(read)
        slots.run(read)
    raise AssertionError("a prompt always has a last chunk")  # begin() keeps at most n - 1 tokens
