"""At temperature > 0, lookup samples the target's distribution (chi-square against exact values),
and with the same seed it gives plain decoding's reply, token for token.

A lookup draft is a deterministic proposal (q one-hot): it is accepted with probability p(d), and on
rejection the token comes from p without d, renormalised. On a 16-token model whose prompt repeats
a phrase (so the n-gram pool has matches), the exact marginals of the first generated tokens are
computed by enumerating prefixes with the target alone; lookup's samples over many seeds must fit.
The helpers and thresholds are those of ``tests/test_distribution.py``. The verifier decides such a
draft with the target's own sample (engine/speculative/verify.py), one random number per emitted token as
in plain decoding, so the replies of ar and lookup with one seed must be the same tokens.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from engine import Engine, EngineConfig, GenerationParams, SamplingParams
from engine.speculative.costmodel import CostModel
from tests.test_distribution import ALPHA, ENDED, N_SAMPLES, _exact_marginals, _pvalue
from tests.tiny_models import TinyPair

PROMPT = [1, 3, 4, 5, 3, 4, 5, 3, 4, 5, 3]  # <s> a b c a b c a b c a: the pool has matches to draft from
POSITIONS = 4
SAMPLINGS = [SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0),
             SamplingParams(temperature=0.7, top_k=8, top_p=0.9, min_p=0.0)]
SAMPLING_IDS = ["t1", "t0.7-topk-topp"]


@pytest.fixture
def whole_chains(monkeypatch: pytest.MonkeyPatch) -> None:
    """Draft the pool's whole chain every round, at a rate auto always takes: every verification path runs."""
    monkeypatch.setattr(CostModel, "lookup_length", lambda self, expected: (len(expected) - 1, 1e9))


def _seeded(sampling: SamplingParams, seed: int) -> SamplingParams:
    return SamplingParams(temperature=sampling.temperature, top_k=sampling.top_k, top_p=sampling.top_p,
                          min_p=sampling.min_p, seed=seed)


@pytest.mark.usefixtures("whole_chains")
@pytest.mark.parametrize("sampling", SAMPLINGS, ids=SAMPLING_IDS)
def test_lookup_sampling_matches_target_distribution(tiny: TinyPair, sampling: SamplingParams) -> None:
    exact = _exact_marginals(str(tiny.small_target), sampling, POSITIONS, PROMPT)
    counts: list[Counter[int]] = [Counter() for _ in range(POSITIONS)]
    drafted = 0
    with Engine(EngineConfig(str(tiny.small_target), None, n_ctx=256)) as eng:
        for seed in range(N_SAMPLES):
            s = _seeded(sampling, seed)
            gen = eng.generate(PROMPT, GenerationParams(mode="lookup", max_tokens=POSITIONS, sampling=s)).run()
            drafted += gen.stats.drafted
            for i in range(POSITIONS):
                counts[i][gen.tokens[i] if i < len(gen.tokens) else ENDED] += 1
    assert drafted > N_SAMPLES, "the pool drafted too little for the test to mean anything"
    for i in range(1, POSITIONS):  # position 0 comes from prefill
        p = _pvalue(counts[i], exact[i])
        assert p > ALPHA, f"lookup position {i}: chi-square p={p:.2g}\nobserved={dict(counts[i])}\nexact={exact[i]}"


@pytest.fixture(scope="module", params=["host", "backend"])
def target_alone(request: pytest.FixtureRequest, tiny: TinyPair) -> Iterator[Engine]:
    """The tiny target without a draft model, on each sampling path."""
    with Engine(EngineConfig(str(tiny.small_target), None, n_ctx=256, sampling_path=request.param)) as eng:
        yield eng


@pytest.mark.usefixtures("whole_chains")
@pytest.mark.parametrize("sampling", SAMPLINGS, ids=SAMPLING_IDS)
def test_sampled_lookup_and_auto_give_plain_decodings_reply_for_a_seed(
    target_alone: Engine, sampling: SamplingParams
) -> None:
    rejected = drafted = 0
    for seed in range(60):
        s = _seeded(sampling, seed)
        ar = target_alone.generate(PROMPT, GenerationParams(mode="ar", max_tokens=24, sampling=s)).run()
        for mode in ("lookup", "auto"):  # auto on a target alone: ar steps and the pool's drafts
            gen = target_alone.generate(PROMPT, GenerationParams(mode=mode, max_tokens=24, sampling=s)).run()
            assert gen.tokens == ar.tokens, f"{mode}, seed {seed}"
            drafted += gen.stats.drafted
            rejected += gen.stats.drafted - gen.stats.accepted
    assert drafted > 200 and rejected > 20, "too few drafts, or no rejections, for the test to mean anything"
