"""At temperature > 0, sd and ssd sample the target's distribution (chi-square against exact values), under
coupled sampling (the default) and standard speculative sampling (rejection).

On a 16-token model the exact marginal distributions of the 2nd and 3rd generated tokens are
computed by enumerating prefixes with the target alone; sd and ssd samples over many seeds must
fit them. A control shows the test has power: samples from the draft alone are rejected.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import chisquare

from engine import Engine, EngineConfig, GenerationParams, SamplingParams
from engine.core.backend import Model
from engine.core.context import Context, ContextParams
from engine.core.sampling import to_dist
from tests.tiny_models import TinyPair

pytestmark = pytest.mark.long

N_SAMPLES = 1500
PROMPT = [1, 3, 4, 5]  # <s> a b c
ENDED = -1  # category: the reply ended (EOS) before this position
ALPHA = 1e-3


def _exact_marginals(model_path: str, params: SamplingParams, positions: int,
                     prompt: list[int] = PROMPT) -> list[dict[int, float]]:
    """P(token at generated position i after ``prompt``) for i < positions, by enumerating prefixes."""
    with Model(model_path) as m, Context(m, ContextParams(n_ctx=64, n_batch=32)) as ctx:
        cache: dict[tuple[int, ...], np.ndarray] = {}

        def next_probs(prefix: tuple[int, ...]) -> np.ndarray:
            if prefix not in cache:
                ctx.clear()
                row = ctx.prefill(list(prefix), 0)
                cache[prefix] = to_dist(row, params).dense(m.n_vocab)
            return cache[prefix]

        out: list[dict[int, float]] = [{} for _ in range(positions)]
        frontier = {(): 1.0}
        for i in range(positions):
            nxt: dict[tuple[int, ...], float] = {}
            for gen, w in frontier.items():
                probs = next_probs(tuple(prompt) + gen)
                for t in np.nonzero(probs)[0].tolist():
                    pw = w * float(probs[t])
                    if m.is_eog(t):
                        for j in range(i, positions):
                            out[j][ENDED] = out[j].get(ENDED, 0.0) + pw
                    else:
                        out[i][t] = out[i].get(t, 0.0) + pw
                        nxt[(*gen, t)] = pw
            frontier = nxt
        return out


def _samples(eng: Engine, params: GenerationParams, positions: int) -> list[Counter[int]]:
    counts: list[Counter[int]] = [Counter() for _ in range(positions)]
    for seed in range(N_SAMPLES):
        p = GenerationParams(
            mode=params.mode, k=params.k, fanout=params.fanout, max_tokens=positions, backup=params.backup,
            sampling=replace(params.sampling, seed=seed),
        )
        toks = eng.generate(PROMPT, p).run().tokens
        for i in range(positions):
            counts[i][toks[i] if i < len(toks) else ENDED] += 1
    return counts


def _pvalue(observed: Counter[int], expected: dict[int, float]) -> float:
    keys = sorted(expected, key=lambda k: -expected[k])
    obs, exp = [], []
    rest_o, rest_e = 0, 0.0
    for k in keys:
        e = expected[k] * N_SAMPLES
        if e >= 5:
            obs.append(observed.get(k, 0))
            exp.append(e)
        else:
            rest_o += observed.get(k, 0)
            rest_e += e
    unexpected = sum(v for k, v in observed.items() if k not in expected)
    assert unexpected == 0, f"sampled tokens with zero target probability: {observed}"
    if rest_e > 0:
        obs.append(rest_o)
        exp.append(rest_e)
    exp_arr = np.array(exp) * (sum(obs) / sum(exp))
    return float(chisquare(obs, exp_arr).pvalue)


@pytest.fixture(scope="module", params=["host", "backend"])
def small_engine(request: pytest.FixtureRequest, tiny: TinyPair) -> Iterator[Engine]:
    """The pair on each sampling path: numpy on the logits rows, or llama.cpp's sampler chain."""
    cfg = EngineConfig(str(tiny.small_target), str(tiny.small_draft), n_ctx=256, sampling_path=request.param)
    with Engine(cfg) as eng:
        yield eng


WHOLE = {"top_k": 0, "top_p": 1.0, "min_p": 0.0}  # the whole vocabulary


def _as_run(sampling: SamplingParams, path: str, n_vocab: int) -> SamplingParams:
    """The case on ``path``: llama.cpp's chain never runs top-k 0 (a vocabulary-wide row comes back either way), so
    the backend engine draws the whole vocabulary as top-k over every id, the same distribution."""
    return replace(sampling, top_k=n_vocab) if path == "backend" and sampling.top_k == 0 else sampling
CASES = [
    ("sd", SamplingParams(temperature=1.0, **WHOLE)),
    ("ssd", SamplingParams(temperature=1.0, **WHOLE)),
    ("ssd", SamplingParams(temperature=0.7, top_k=8, top_p=0.9, min_p=0.0)),
    ("sd", SamplingParams(temperature=0.8)),  # the defaults: top-k 40, top-p 0.95, min-p 0.05
    ("ssd", SamplingParams(temperature=0.8)),
    ("sd", SamplingParams(temperature=1.0, scheme="rejection", **WHOLE)),  # standard speculative sampling
    ("ssd", SamplingParams(temperature=0.8, scheme="rejection")),
]


@pytest.mark.parametrize(("mode", "sampling"), CASES,
                         ids=["sd-t1", "ssd-t1", "ssd-t0.7-topk-topp", "sd-defaults", "ssd-defaults", "sd-t1-rejection",
                              "ssd-defaults-rejection"])
def test_speculative_sampling_matches_target_distribution(
    small_engine: Engine, tiny: TinyPair, mode: str, sampling: SamplingParams
) -> None:
    path = small_engine.config.sampling_path
    sampling = _as_run(sampling, path, small_engine.target_ctx.n_vocab)
    positions = 3
    exact = _exact_marginals(str(tiny.small_target), sampling, positions)
    counts = _samples(small_engine, GenerationParams(mode=mode, k=2, fanout=2, sampling=sampling), positions)
    assert small_engine.target.path == path and small_engine.drafter is not None
    assert small_engine.drafter.path == path
    for i in (1, 2):  # positions produced by speculative rounds (position 0 comes from prefill)
        p = _pvalue(counts[i], exact[i])
        assert p > ALPHA, (f"{mode} ({path}) position {i}: chi-square p={p:.2g}\nobserved={dict(counts[i])}"
                           f"\nexact={exact[i]}")


def test_chi_square_detects_the_draft_distribution(tiny: TinyPair) -> None:
    """Control: samples from the draft alone (a different distribution) must fail the same test."""
    sampling = SamplingParams(temperature=1.0, **WHOLE)
    exact = _exact_marginals(str(tiny.small_target), sampling, 3)
    with Engine(EngineConfig(str(tiny.small_draft), None, n_ctx=256)) as draft_only:
        counts = _samples(draft_only, GenerationParams(mode="ar", sampling=sampling), 3)
    assert min(_pvalue(counts[i], exact[i]) for i in (1, 2)) < ALPHA
