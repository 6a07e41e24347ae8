"""Position-keyed Gumbel-max sampling: a reply that is a function of the target, the prompt and the seed alone.

Every position of a reply has its own public noise: a Gumbel variable per token id, keyed by (seed, absolute
position, token id) through a counter-based hash (splitmix64), so no generator state is spent and any side — the
target verifying a batch, the draft drafting ahead, the tree pre-drafting a branch — reads the same noise for
the same position. ``argmax(log p(x) + g(x))`` over the candidates of a truncated distribution p is an exact
sample from p (the Gumbel-max trick); the noise is drawn only for those candidates, never for the vocabulary.

With the draft drafting ``argmax(log q(x) + g(x))`` under the same noise, verification is a comparison (accept
while the target's own token equals the draft's), and ar, sd, ssd, lookup and auto give the same tokens
(Daliri, Musco, Suresh, "Coupling without Communication and Drafter-Invariant Speculative Decoding", 2024).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from .ranks import FloatRow, IdRow
from .sampling import Dist, SamplingParams, to_dist

COUPLED, REJECTION = "coupled", "rejection"  # the sampling schemes (engine.core.options.SCHEME)

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15  # splitmix64's increment: consecutive counters land far apart
_MUL1, _MUL2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB  # splitmix64's finaliser multipliers
_UNIT = 2.0**-53  # a 53-bit integer times this is a double in [0, 1)


def _mix(x: int) -> int:
    """splitmix64's finaliser on one 64-bit integer (Python ints: no overflow warnings)."""
    x = ((x ^ (x >> 30)) * _MUL1) & _M64
    x = ((x ^ (x >> 27)) * _MUL2) & _M64
    return x ^ (x >> 31)


def _mix_array(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """:func:`_mix` over an array (uint64 arithmetic wraps modulo 2**64, as the finaliser wants)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(_MUL1)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(_MUL2)
    return x ^ (x >> np.uint64(31))


def position_key(seed: int, position: int) -> int:
    """The key of one position of one reply: two rounds of the hash over the seed, then the position."""
    return _mix((_mix((seed * _GOLDEN + _GOLDEN) & _M64) + position * _GOLDEN) & _M64)


def uniforms(seed: int, position: int, ids: IdRow) -> npt.NDArray[np.float64]:
    """One uniform in (0, 1) per token id of ``ids`` at ``position`` (the same id, the same number, always)."""
    key = np.uint64(position_key(seed, position))
    h = _mix_array(ids.astype(np.uint64) * np.uint64(_GOLDEN) ^ key)
    return ((h >> np.uint64(11)).astype(np.float64) + 0.5) * _UNIT


def scores(dist: Dist, seed: int, position: int) -> npt.NDArray[np.float64]:
    """``log p(x) + g(x)`` for each candidate x of ``dist``: g = -log(-log u) is standard Gumbel noise."""
    u = uniforms(seed, position, dist.ids)
    with np.errstate(divide="ignore"):  # a candidate of probability 0 scores -inf: never drawn
        return np.log(dist.probs) - np.log(-np.log(u))


def gumbel_sample(dist: Dist, seed: int, position: int) -> int:
    """The token at ``position``: the candidate with the best perturbed score, an exact sample from ``dist``."""
    if len(dist.ids) == 1:
        return int(dist.ids[0])
    return int(dist.ids[int(np.argmax(scores(dist, seed, position)))])


def gumbel_order(dist: Dist, seed: int, position: int, count: int) -> IdRow:
    """The ``count`` best candidates by perturbed score: the draft's token first, then its next choices under the
    same noise (where the target's own token most likely is when it differs: the tree's branches)."""
    order = np.argsort(-scores(dist, seed, position), kind="stable")[:count]
    return dist.ids[order].astype(np.int64)


def score_margin(row: FloatRow, params: SamplingParams, position: int) -> float:
    """The gap between the two best perturbed scores of a logits row at ``position`` (infinite with one candidate
    kept): a small gap is a floating-point near-tie, where a batch and a single token may choose differently."""
    best = np.sort(scores(to_dist(row, params), params.seed, position))[-2:]
    return float(best[1] - best[0]) if len(best) == 2 else float("inf")


def fingerprint(stamps: Iterable[object], scheme: str) -> str:
    """A reply's ``system_fingerprint``: the model files (path, size, modification time), llama.cpp's build and the
    sampling scheme. While it stays the same, one seed gives one reply; when it changes, a seed may not repeat."""
    from llama_cpp import __version__ as build

    return "fp_" + hashlib.sha256(repr((tuple(stamps), build, scheme)).encode()).hexdigest()[:12]
