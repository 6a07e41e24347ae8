"""At temperature > 0, lookup samples the target's distribution (chi-square against exact values).

A lookup draft is a deterministic proposal (q one-hot): it is accepted with probability p(d), and on
rejection the token comes from p without d, renormalised. On a 16-token model whose prompt repeats
a phrase (so the n-gram pool has matches), the exact marginals of the first generated tokens are
computed by enumerating prefixes with the target alone; lookup's samples over many seeds must fit.
The helpers and thresholds are those of ``tests/test_distribution.py``.
"""

from __future__ import annotations

from collections import Counter

import pytest

from engine import Engine, EngineConfig, GenerationParams, SamplingParams
from engine.spec.costmodel import CostModel
from tests.test_distribution import ALPHA, ENDED, N_SAMPLES, _exact_marginals, _pvalue
from tests.tiny_models import TinyPair

PROMPT = [1, 3, 4, 5, 3, 4, 5, 3, 4, 5, 3]  # <s> a b c a b c a b c a: the pool has matches to draft from
POSITIONS = 4


@pytest.mark.parametrize("sampling", [SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0),
                                      SamplingParams(temperature=0.7, top_k=8, top_p=0.9, min_p=0.0)],
                         ids=["t1", "t0.7-topk-topp"])
def test_lookup_sampling_matches_target_distribution(
    tiny: TinyPair, sampling: SamplingParams, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Draft the pool's whole chain every round (no cost cut), so every verification path runs.
    monkeypatch.setattr(CostModel, "lookup_length", lambda self, expected: (len(expected) - 1, 1.0))
    exact = _exact_marginals(str(tiny.small_target), sampling, POSITIONS, PROMPT)
    counts: list[Counter[int]] = [Counter() for _ in range(POSITIONS)]
    drafted = 0
    with Engine(EngineConfig(str(tiny.small_target), None, n_ctx=256)) as eng:
        for seed in range(N_SAMPLES):
            s = SamplingParams(temperature=sampling.temperature, top_k=sampling.top_k, top_p=sampling.top_p,
                               min_p=sampling.min_p, seed=seed)
            gen = eng.generate(PROMPT, GenerationParams(mode="lookup", max_tokens=POSITIONS, sampling=s)).run()
            drafted += gen.stats.drafted
            for i in range(POSITIONS):
                counts[i][gen.tokens[i] if i < len(gen.tokens) else ENDED] += 1
    assert drafted > N_SAMPLES, "the pool drafted too little for the test to mean anything"
    for i in range(1, POSITIONS):  # position 0 comes from prefill
        p = _pvalue(counts[i], exact[i])
        assert p > ALPHA, f"lookup position {i}: chi-square p={p:.2g}\nobserved={dict(counts[i])}\nexact={exact[i]}"
