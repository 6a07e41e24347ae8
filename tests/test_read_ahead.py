"""A draft on cores of its own reads the prompt while the target prefills it (engine.spec.drafter.PromptRead)."""

from __future__ import annotations

import numpy as np
import pytest

from engine import Engine, EngineConfig, GenerationParams
from engine.core.options import cpu_cores
from engine.spec.exactness import first_difference
from tests.tiny_models import TinyPair

needs_two_cores = pytest.mark.skipif(cpu_cores() < 2, reason="the target and the draft need a core each")


def _prompt(seed: int, vocab: int) -> list[int]:
    return [1, *np.random.default_rng(seed).integers(3, vocab, size=30).tolist()]


@needs_two_cores
def test_the_draft_reads_the_prompt_while_the_target_does(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=512, threads=1,
                             draft_threads=1)) as eng:
        prompt = _prompt(1, eng.target_model.n_vocab)
        eng.generate(prompt, GenerationParams(mode="sd", max_tokens=1)).run()  # the first token only: no round
        assert eng.drafter is not None and eng.drafter.lag(prompt) == 0


def test_a_draft_sharing_the_cores_waits_for_its_first_round(tiny: TinyPair) -> None:
    cores = cpu_cores()
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=512, threads=cores,
                             draft_threads=cores)) as eng:
        prompt = _prompt(1, eng.target_model.n_vocab)
        eng.generate(prompt, GenerationParams(mode="sd", max_tokens=1)).run()
        assert eng.drafter is not None and eng.drafter.lag(prompt) == len(prompt)  # it would slow the prefill


@needs_two_cores
def test_greedy_replies_with_the_draft_reading_ahead_match_ar(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024, threads=1,
                             draft_threads=1)) as eng:
        for seed in range(4):  # a new prompt each time: the draft has it all to read
            prompt = _prompt(seed, eng.target_model.n_vocab)
            ref = eng.generate(prompt, GenerationParams(mode="ar", max_tokens=30)).run()
            for mode in ("sd", "ssd", "auto"):
                other = _prompt(100 + seed, eng.target_model.n_vocab)
                eng.generate(other, GenerationParams(mode="sd", max_tokens=2)).run()  # the draft now holds another
                got = eng.generate(prompt, GenerationParams(mode=mode, max_tokens=30)).run()
                assert got.tokens == ref.tokens, f"{mode}: diverges at {first_difference(got.tokens, ref.tokens)}"
