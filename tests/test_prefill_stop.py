"""A stop asked while the prompt is read ends the generation after the chunk in progress, not the whole prompt
(a client that leaves during prompt processing); real llama.cpp on the tiny pair, counted in chunks, not timed."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from engine import Engine, EngineConfig, GenerationParams, SamplingParams, TinyPair
from engine.core.context import Context

PROMPT = [3 + (i * 37) % 4000 for i in range(2000)]  # chunks of the prompt grid (engine.core.options.PREFILL_GRID)
MAX_TOKENS = 6


class LeavesAfter(threading.Event):
    """A stop Event that is set once ``ctx`` has decoded ``chunks`` more batches: the client leaves then."""

    def __init__(self, ctx: Context, chunks: int) -> None:
        super().__init__()
        self._ctx = ctx
        self._at = ctx.n_decodes + chunks

    def is_set(self) -> bool:
        if self._ctx.n_decodes >= self._at:
            self.set()
        return super().is_set()


@pytest.fixture
def engine(tiny: TinyPair) -> Iterator[Engine]:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=2048, threads=1,
                             draft_threads=1)) as eng:
        yield eng


def params(mode: str) -> GenerationParams:
    return GenerationParams(mode=mode, max_tokens=MAX_TOKENS, sampling=SamplingParams(temperature=0.0))


def fresh(eng: Engine) -> None:
    """Forget the prompt both models hold, so the next generation reads all of it."""
    eng.target.kv.reset()
    if eng.drafter is not None:
        eng.drafter.reset()


@pytest.mark.parametrize("mode", ["ar", "ssd"])
def test_a_stop_during_the_prompt_ends_after_the_chunk_in_progress(engine: Engine, mode: str) -> None:
    plain = engine.generate(PROMPT, params("ar")).run().tokens
    assert len(plain) == MAX_TOKENS
    chunks = -(-len(PROMPT) // engine.target.kv.step)  # the prompt grid's chunks
    assert chunks > 1

    fresh(engine)
    before = engine.target_ctx.n_decodes
    gen = engine.generate(PROMPT, params(mode), LeavesAfter(engine.target_ctx, 1)).run()
    assert gen.tokens == [] and gen.stats.finish_reason == "stopped"
    assert engine.target_ctx.n_decodes - before == 1  # one chunk of several, then the stop was seen

    # what was read stays in the KV as a prefix; the next reply reads the rest and is plain decoding's
    before = engine.target_ctx.n_decodes
    again = engine.generate(PROMPT, params(mode)).run()
    assert again.tokens == plain
    assert engine.target_ctx.n_decodes - before < chunks + again.stats.rounds


def test_a_stop_set_before_the_prompt_is_read_decodes_nothing(engine: Engine) -> None:
    fresh(engine)
    stop = threading.Event()
    stop.set()
    before = engine.target_ctx.n_decodes
    gen = engine.generate(PROMPT, params("ar"), stop).run()
    assert gen.tokens == [] and engine.target_ctx.n_decodes == before
