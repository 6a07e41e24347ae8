"""Greedy sd and ssd are token-identical to ar on tiny generated models."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from engine import Engine, EngineConfig, GenerationParams
from engine.speculative.exactness import first_difference
from tests.tiny_models import TinyPair

N_TOKENS = 40


def _prompts(n: int, vocab: int) -> list[list[int]]:
    rng = np.random.default_rng(1234)
    out = []
    for _ in range(n):
        length = int(rng.integers(3, 40))
        out.append([1, *rng.integers(3, vocab, size=length).tolist()])
    return out


@pytest.fixture(scope="module", params=["draft_same", "draft_related", "draft_random"])
def engine(request: pytest.FixtureRequest, tiny: TinyPair) -> Iterator[tuple[str, Engine]]:
    with Engine(EngineConfig(str(tiny.target), str(getattr(tiny, request.param)), n_ctx=1024)) as eng:
        yield request.param, eng


SPEC_SETTINGS = [
    GenerationParams(mode="sd", k=1),
    GenerationParams(mode="sd", k=4),
    GenerationParams(mode="ssd", k=3, fanout=2),
    GenerationParams(mode="ssd", k=5, fanout=1, geometric=True),
    GenerationParams(mode="ssd", k=2, fanout=3, backup="ngram"),
    GenerationParams(mode="ssd", k=4, fanout=2, early_stop=False),
    GenerationParams(mode="auto", k=4, fanout=2),
    GenerationParams(mode="auto", k=3, fanout=1, adaptive=False),
    GenerationParams(mode="lookup"),
]


def test_greedy_speculation_matches_ar(engine: tuple[str, Engine]) -> None:
    name, eng = engine
    for prompt in _prompts(8, eng.target_model.n_vocab):
        ref = eng.generate(prompt, GenerationParams(mode="ar", max_tokens=N_TOKENS)).run()
        assert len(ref.tokens) > 0
        for base in SPEC_SETTINGS:
            params = GenerationParams(
                mode=base.mode, k=base.k, fanout=base.fanout, geometric=base.geometric, backup=base.backup,
                early_stop=base.early_stop, adaptive=base.adaptive, max_tokens=N_TOKENS,
            )
            got = eng.generate(prompt, params).run()
            assert got.tokens == ref.tokens, f"{name} {params}: diverges at {first_difference(got.tokens, ref.tokens)}"


def _repetitive_prompts(n: int, vocab: int) -> list[list[int]]:
    """Prompts that repeat a phrase, so the n-gram pool has long matches (and wrong ones) to draft from."""
    rng = np.random.default_rng(99)
    out = []
    for _ in range(n):
        phrase = rng.integers(3, vocab, size=int(rng.integers(3, 12))).tolist()
        out.append([1, *phrase * int(rng.integers(2, 5)), *phrase[: int(rng.integers(1, len(phrase)))]])
    return out


def test_greedy_lookup_and_auto_without_a_draft_match_ar(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), None, n_ctx=1024)) as eng:
        drafted = 0
        for prompt in _repetitive_prompts(6, eng.target_model.n_vocab) + _prompts(3, eng.target_model.n_vocab):
            ref = eng.generate(prompt, GenerationParams(mode="ar", max_tokens=N_TOKENS)).run()
            for mode in ("lookup", "auto"):
                got = eng.generate(prompt, GenerationParams(mode=mode, max_tokens=N_TOKENS)).run()
                assert got.tokens == ref.tokens, f"{mode}: diverges at {first_difference(got.tokens, ref.tokens)}"
                assert set(got.stats.rounds_by_mode) <= {"ar", "lookup"}
                drafted += got.stats.drafted
        assert drafted > 0  # the pool did draft


def test_identical_draft_hits_nearly_always(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_same), n_ctx=1024)) as eng:
        prompt = eng.tokenize("The quick brown fox")
        gen = eng.generate(prompt, GenerationParams(mode="ssd", k=4, fanout=2, max_tokens=120, early_stop=False)).run()
        s = gen.stats
        assert s.acceptance_rate == 1.0
        assert s.hit_rate is not None and s.hit_rate >= 0.9, s
        assert s.lookups >= 10


def test_random_draft_misses_and_rolls_back(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_random), n_ctx=1024)) as eng:
        prompt = eng.tokenize("The quick brown fox")
        ref = eng.generate(prompt, GenerationParams(mode="ar", max_tokens=150)).run()
        gen = eng.generate(prompt, GenerationParams(mode="ssd", k=3, max_tokens=150, miss_limit=3)).run()
        s = gen.stats
        assert gen.tokens == ref.tokens
        assert s.backup_uses >= 3
        assert s.hit_rate is not None and s.hit_rate < 0.5
        assert any(sw.startswith("ssd->sd") for sw in s.mode_switches), s.mode_switches
        assert s.rounds_by_mode.get("sd", 0) > 0


def test_chat_turns_reuse_prefix_and_stay_exact(tiny: TinyPair) -> None:
    """A second turn extends the first: KV reuse on both models must not change the output."""
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024)) as eng:
        first = eng.messages_tokens([{"role": "user", "content": "hello there"}])
        a = eng.generate(first, GenerationParams(mode="ssd", max_tokens=20)).run()
        turn2 = [*first, *a.tokens, *eng.tokenize("and then?")[1:]]
        spec = eng.generate(turn2, GenerationParams(mode="ssd", max_tokens=30)).run()
        ref = eng.generate(turn2, GenerationParams(mode="ar", max_tokens=30)).run()
        assert spec.tokens == ref.tokens


def test_auto_long_generation_is_exact_and_switches(tiny: TinyPair) -> None:
    """auto changes mode and K as it measures; every switch must keep the output exact."""
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=2048)) as eng:
        prompt = eng.tokenize("Once upon a time")
        ref = eng.generate(prompt, GenerationParams(mode="ar", max_tokens=400)).run()
        got = eng.generate(prompt, GenerationParams(mode="auto", max_tokens=400)).run()
        assert got.tokens == ref.tokens
        # it measured more than one mode (probes), and every mode change kept the output exact
        assert len(got.stats.rounds_by_mode) >= 2, got.stats.rounds_by_mode
