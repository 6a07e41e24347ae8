"""Several replies at once on one target context: each greedy reply is the one it makes alone, in every mode."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest

from engine import Engine, EngineConfig, GenerationParams
from engine.batch.rounds import pieces
from engine.core.sampling import SamplingParams
from engine.errors import EngineError
from tests.tiny_models import TinyPair

N_TOKENS = 48
REPLIES = 4


def _prompts(n: int, vocab: int) -> list[list[int]]:
    rng = np.random.default_rng(77)
    return [[1, *rng.integers(3, vocab, size=int(rng.integers(5, 150))).tolist()] for _ in range(n)]


@pytest.fixture(scope="module")
def engines(tiny: TinyPair) -> Iterator[tuple[Engine, Engine]]:
    """The same pair twice: one reply at a time, and four at once."""
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=512)) as solo, \
            Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=512, parallel=REPLIES)) as many:
        yield solo, many


def _together(eng: Engine, prompts: list[list[int]], params: list[GenerationParams]) -> list[list[int]]:
    """Run every prompt on its own thread at once; each reply's tokens."""
    out: list[list[int]] = [[] for _ in prompts]
    errors: list[BaseException] = []
    start = threading.Barrier(len(prompts))

    def one(i: int) -> None:
        try:
            start.wait()
            out[i] = list(eng.generate(prompts[i], params[i]).run().tokens)
        except BaseException as exc:  # reported below, with the reply it belongs to
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return out


@pytest.mark.parametrize("mode", ["ar", "sd", "ssd", "lookup", "auto"])
def test_each_reply_is_its_reply_alone(engines: tuple[Engine, Engine], tiny: TinyPair, mode: str) -> None:
    solo, many = engines
    prompts = _prompts(REPLIES, solo.target_model.n_vocab)
    params = [GenerationParams(mode=mode, max_tokens=N_TOKENS + 8 * i, k=3) for i in range(REPLIES)]
    alone = [list(solo.generate(p, q).run().tokens) for p, q in zip(prompts, params, strict=True)]
    assert _together(many, prompts, params) == alone
    assert many._rounds.decodes > 0 and many._rounds.rows > many._rounds.decodes  # rounds were shared


def test_a_round_is_decoded_in_pieces_of_consecutive_sequences() -> None:
    assert pieces([3, 0, 1, 2], 3) == [[0, 1, 2], [3]]
    assert pieces([3, 1, 0], 3) == [[0, 1], [3]]
    assert pieces([2, 0], 8) == [[0], [2]]
    assert pieces([5, 4, 3, 2, 1, 0], 4) == [[0, 1, 2, 3], [4, 5]]


def test_a_new_reply_takes_a_sequence_next_to_a_busy_one(engines: tuple[Engine, Engine]) -> None:
    _, many = engines
    rng = np.random.default_rng(5)
    fresh = [[1, *rng.integers(3, many.target_model.n_vocab, size=90).tolist()] for _ in range(2)]
    held = [many._slots.take(fresh[0], 1.0) for _ in range(REPLIES)]
    for seq in (1, 3, 0, 2):  # the longest idle first: 1, then 3, which is not next to 1
        many._slots.give(next(t for t in held if t is not None and t.seq == seq))
    first = many._slots.take(fresh[0], 1.0)
    second = many._slots.take(fresh[1], 1.0)
    assert first is not None and second is not None
    try:
        assert abs(first.seq - second.seq) == 1
    finally:
        many._slots.give(first)
        many._slots.give(second)


def test_a_shared_decode_lists_its_sequences_in_order(engines: tuple[Engine, Engine],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """llama.cpp splits a batch over separate KV streams where the sequence ids are not consecutive ones."""
    _, many = engines
    ctx = many.target_ctx
    decode = ctx.decode_out
    shared: list[list[int]] = []

    def recording(tokens: list[int], positions: list[int], seq_ids: object = 0, outputs: object = None) -> object:
        if isinstance(seq_ids, list) and len(set(seq_ids)) > 1:
            shared.append(seq_ids)
        return decode(tokens, positions, seq_ids, outputs)  # type: ignore[arg-type]

    monkeypatch.setattr(ctx, "decode_out", recording)
    prompts = _prompts(REPLIES, many.target_model.n_vocab)
    _together(many, prompts, [GenerationParams(mode="ar", max_tokens=N_TOKENS) for _ in prompts])
    assert shared and all(seqs == list(range(seqs[0], seqs[0] + len(seqs))) for seqs in shared)


def test_a_seeded_sampled_reply_is_the_same_beside_others(engines: tuple[Engine, Engine]) -> None:
    solo, many = engines
    prompts = _prompts(REPLIES, solo.target_model.n_vocab)
    params = [GenerationParams(mode="auto", max_tokens=N_TOKENS, sampling=SamplingParams(temperature=0.9, seed=11 + i))
              for i in range(REPLIES)]
    alone = [list(solo.generate(p, q).run().tokens) for p, q in zip(prompts, params, strict=True)]
    assert _together(many, prompts, params) == alone


def test_a_reply_after_any_other_is_the_same(engines: tuple[Engine, Engine]) -> None:
    """A prompt read after a related one (a shared prefix in the cache) gives the reply of a fresh read."""
    solo, _ = engines
    base = _prompts(1, solo.target_model.n_vocab)[0]
    params = GenerationParams(mode="ar", max_tokens=N_TOKENS)
    fresh = list(solo.generate(base, params).run().tokens)
    for cut in (5, 64, 70, 100, len(base) - 1):
        solo.generate([*base[:cut], 5, 6, 7], params).run()  # leaves its own prefix behind
        assert list(solo.generate(base, params).run().tokens) == fresh, cut


def test_replies_beyond_the_sequences_wait_then_are_refused(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), n_ctx=256, parallel=2)) as eng:
        gens = [eng.generate([1, 5, 6], GenerationParams(mode="ar", max_tokens=50)) for _ in range(3)]
        its = [iter(g) for g in gens[:2]]
        for it in its:
            next(it)  # both sequences held
        assert eng.slots() == [(0, True, False), (1, True, False)] or sum(b for _, b, _ in eng.slots()) == 2
        with pytest.raises(EngineError, match="all 2 replies"):
            next(iter(gens[2]))
        for g in gens[:2]:
            g.close()
        assert [b for _, b, _ in eng.slots()] == [False, False]


def test_going_back_to_a_conversation_restores_its_prompt(tiny: TinyPair) -> None:
    """A sequence that reads another conversation keeps the first one's prompt in host memory; going back to it
    restores those positions instead of reading them, and the reply is a fresh read's."""
    with Engine(EngineConfig(str(tiny.target), n_ctx=512, prompt_cache_mb=16)) as eng, \
            Engine(EngineConfig(str(tiny.target), n_ctx=512, prompt_cache_mb=0)) as plain:
        vocab = eng.target_model.n_vocab
        first = [1, *(3 + (i * 7) % (vocab - 3) for i in range(150))]  # two whole grid chunks and some
        other = [1, *(3 + (i * 11) % (vocab - 3) for i in range(40))]
        params = GenerationParams(mode="ar", max_tokens=N_TOKENS)
        fresh = list(plain.generate(first, params).run().tokens)
        eng.generate(first, params).run()
        eng.generate(other, params).run()  # the one sequence reads another conversation
        back = eng.generate(first, params).run()
        assert list(back.tokens) == fresh
        assert eng.prompt_cache.restored == 1 and back.stats.prompt_cached == len(first) // 64 * 64
        plain.generate(other, params).run()
        assert plain.generate(first, params).run().stats.prompt_cached == 0  # without the cache: read again
