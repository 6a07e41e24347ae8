"""What one decode gives back, read where it lies: logits rows (host path) or llama.cpp's sampling (backend path).

Host path: :class:`Outputs` reads zero-copy views of the context's logits rows (valid until the
next decode, checked) and runs the argmax / top ids / truncated distribution of
:mod:`engine.core.sampling` on them; no row is copied. Backend path: a sampler chain attached to
every sequence of the context (:class:`BackendSamplers`, llama.cpp's experimental
``llama_set_sampler``) runs in the model's graph on the device that ran the model, and only token
ids or the top candidates with their logits come back: greedy target rounds read one token id per
position, the draft reads its best ``top_count`` ids, sampled rounds read the candidates the chain
top-k → temperature → top-p → min-p left (the same transforms, in the same order, as
:func:`~engine.core.sampling.to_dist`, for target and draft alike, so speculative sampling stays
exact over the truncated distributions).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import llama_cpp as ll
import numpy as np
import numpy.typing as npt

from engine.errors import DecodeError

from .ranks import FloatRow, IdRow, top_ids
from .sampling import Dist, SamplingParams, dist_from_candidates, dist_top, order_candidates, to_dist


def _by_address(fn: Any, result: Any = ctypes.c_void_p) -> Any:
    """``fn`` of the binding called straight through its C address, returning a plain int (the binding's wrapper
    builds a pointer object per call: microseconds, several times a row)."""
    return ctypes.CFUNCTYPE(result, ctypes.c_void_p, ctypes.c_int32)(ctypes.cast(fn, ctypes.c_void_p).value or 0)


_logits_ith = _by_address(ll.llama_get_logits_ith)
_sampled_token_ith = _by_address(ll.llama_get_sampled_token_ith, ctypes.c_int32)
_candidates_ith = _by_address(ll.llama_get_sampled_candidates_ith)
_candidates_count_ith = _by_address(ll.llama_get_sampled_candidates_count_ith, ctypes.c_uint32)
_sampled_logits_ith = _by_address(ll.llama_get_sampled_logits_ith)
_VIEWS_KEPT = 256
_views: dict[tuple[int, int, str], npt.NDArray[Any]] = {}  # (address, length, dtype) -> its numpy view

HOST, BACKEND, AUTO = "host", "backend", "auto"  # which path samples (GenerationStats.sampling_path)
PATHS = (AUTO, HOST, BACKEND)
GREEDY, TOP, TRUNC = "greedy", "top", "trunc"  # chain kinds: argmax only; best ids; truncated distribution


@dataclass(frozen=True, slots=True)
class ChainSpec:
    """One sampler chain for every sequence of a context (see :func:`chain_spec`)."""

    kind: str
    top_k: int = 0
    temperature: float = 1.0
    top_p: float = 1.0
    min_p: float = 0.0


def choose_path(prefer: str, params: SamplingParams, on_gpu: bool) -> str:
    """``prefer`` (auto, host or backend) for these settings: auto samples in llama.cpp where the model
    runs on an accelerator (bringing 151,936-float rows back costs there; on a CPU the graph's own
    sampling costs more than numpy on a view); settings the chain cannot express stay on the host."""
    if prefer not in PATHS:
        raise ValueError(f"sampling path must be one of {', '.join(PATHS)}, got {prefer!r}")
    if prefer == HOST or not params.backend_ok:
        return HOST
    return BACKEND if prefer == BACKEND or on_gpu else HOST


def chain_spec(params: SamplingParams, n_vocab: int, *, top_count: int = 0) -> ChainSpec:
    """The chain for ``params``: greedy (the target's argmax, and plain sd's draft, which keeps one id), the
    ``top_count`` best ids (a greedy draft whose tree needs candidates), or the truncation of sampled rounds
    (top-k capped at the vocabulary). A greedy chain returns the token id alone: no candidates to read and order."""
    if params.greedy:
        return ChainSpec(TOP, top_k=min(top_count, n_vocab)) if top_count > 1 else ChainSpec(GREEDY)
    return ChainSpec(TRUNC, min(params.top_k, n_vocab), params.temperature, params.top_p, params.min_p)


class BackendSamplers:
    """The chains attached to a context's sequences; owned here, freed after the context lets go of them."""

    def __init__(self, ctx_ptr: Any, n_seq: int) -> None:
        self._ctx = ctx_ptr
        self._n_seq = n_seq
        self._chains: list[Any] = []
        self.spec: ChainSpec | None = None

    def attach(self, spec: ChainSpec | None) -> None:
        """Give every sequence ``spec``'s chain (None: detach; rows come back as logits again)."""
        if spec == self.spec:
            return
        old = self._chains
        self._chains = [] if spec is None else [_build(spec) for _ in range(self._n_seq)]
        for s in range(self._n_seq):
            if not ll.llama_set_sampler(self._ctx, s, self._chains[s] if self._chains else None):
                raise DecodeError(f"llama.cpp refused a sampler chain for sequence {s}")
        for c in old:
            ll.llama_sampler_free(c)
        self.spec = spec

    def close(self) -> None:
        """Free the chains; call after the context is freed (or once they are detached)."""
        for c in self._chains:
            ll.llama_sampler_free(c)
        self._chains = []
        self.spec = None


def _build(spec: ChainSpec) -> Any:
    chain = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
    if spec.kind == GREEDY:
        ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_greedy())
        return chain
    ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_top_k(spec.top_k))
    if spec.kind == TRUNC:
        if spec.temperature != 1.0:
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_temp(spec.temperature))
        if spec.top_p < 1.0:
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_top_p(spec.top_p, 1))
        if spec.min_p > 0.0:
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_min_p(spec.min_p, 1))
    if spec.kind == TOP or spec.top_p >= 1.0:
        # The ids read back must be a tensor nothing in the graph consumes. ggml reuses a graph's memory plan for any
        # later graph with as many nodes, and a sequence without outputs runs its chain unmarked on a dummy row: in a
        # plan made then, top-k's ids (consumed by the rows it gathers) share memory with later tensors, whose values
        # came back as ids. A second top-k over the k kept re-gathers ids and logits as the graph's last tensors.
        ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_top_k(spec.top_k))
    return chain


def row_view(addr: int, n: int) -> FloatRow:
    """A numpy view of the ``n`` floats at ``addr``; the views of the few addresses a context's rows (and
    sampled candidates) live at are kept: making one costs tens of µs right after a decode, when its code is
    out of the cache."""
    return _view(addr, n, ctypes.c_float)


def _view(addr: int, n: int, ctype: Any) -> npt.NDArray[Any]:
    key = (addr, n, ctype.__name__)
    view = _views.get(key)
    if view is None:
        if len(_views) >= _VIEWS_KEPT:
            _views.clear()
        view = np.ctypeslib.as_array(ctypes.cast(addr, ctypes.POINTER(ctype)), shape=(n,))
        _views[key] = view
    return view


class Outputs:
    """The outputs of one decode, in the order they were asked for; readable until the context decodes again."""

    def __init__(self, ctx_ptr: Any, indices: Sequence[int], n_vocab: int, spec: ChainSpec | None,
                 stamp: Callable[[], int]) -> None:
        self._ctx = ctx_ptr
        self._idx = list(indices)
        self._n_vocab = n_vocab
        self.spec = spec
        self._stamp = stamp
        self._at = stamp()

    @property
    def backend(self) -> bool:
        return self.spec is not None

    def __len__(self) -> int:
        return len(self._idx)

    def _live(self) -> None:
        if self._stamp() != self._at:
            raise RuntimeError("outputs read after the context decoded again (their rows are gone)")

    def row(self, r: int) -> FloatRow:
        """A zero-copy view of output ``r``'s logits (host path only); copy it to keep it past the next decode."""
        self._live()
        if self.spec is not None:
            raise RuntimeError("a backend sampler is attached: llama.cpp returned no logits rows")
        addr = _logits_ith(self._ctx, self._idx[r])
        if not addr:
            raise DecodeError(f"no logits for batch index {self._idx[r]}")
        return row_view(addr, self._n_vocab)

    def argmax(self, r: int) -> int:
        if self.spec is None:
            return int(self.row(r).argmax())
        self._live()
        if self.spec.kind == GREEDY:
            tok = int(_sampled_token_ith(self._ctx, self._idx[r]))
            if tok < 0:
                raise DecodeError(f"llama.cpp sampled no token for batch index {self._idx[r]}")
            return tok
        return int(self.top(r, 1)[0])

    def top(self, r: int, count: int) -> IdRow:
        """The ``count`` best ids, best first, ties to the lowest id (backend: among the chain's candidates; a greedy
        chain knows the best id alone)."""
        if self.spec is None:
            return top_ids(self.row(r), count)
        if self.spec.kind == GREEDY:
            if count > 1:
                raise RuntimeError("the attached greedy chain keeps the best id alone")
            return np.array([self.argmax(r)], dtype=np.int64)[:count]
        ids, logits = self._candidates(r)
        live = np.isfinite(logits)
        return order_candidates(ids[live], logits[live], count)

    def dist(self, r: int, params: SamplingParams) -> Dist:
        """The truncated distribution of ``params`` (backend: built by the chain, which must be ``params``')."""
        if self.spec is None:
            return to_dist(self.row(r), params)
        if self.spec.kind != TRUNC:
            raise RuntimeError(f"the attached {self.spec.kind} chain gives no distribution")
        return dist_from_candidates(*self._candidates(r))

    def dist_top(self, r: int, params: SamplingParams, count: int) -> tuple[Dist, IdRow]:
        """:meth:`dist` and :meth:`top` from one selection (host: one top-k pass serves both)."""
        if self.spec is None:
            return dist_top(self.row(r), params, count)
        if self.spec.kind != TRUNC:
            raise RuntimeError(f"the attached {self.spec.kind} chain gives no distribution")
        cand, logits = self._candidates(r)
        live = np.isfinite(logits)
        return dist_from_candidates(cand, logits), order_candidates(cand[live], logits[live], count)

    def _candidates(self, r: int) -> tuple[npt.NDArray[np.int32], FloatRow]:
        self._live()
        i = self._idx[r]
        n = _candidates_count_ith(self._ctx, i)
        ids_at = _candidates_ith(self._ctx, i)
        logits_at = _sampled_logits_ith(self._ctx, i)
        if n <= 0 or not ids_at or not logits_at:
            raise DecodeError(f"llama.cpp returned no sampled candidates for batch index {i}")
        return _view(ids_at, n, ctypes.c_int32), row_view(logits_at, n)
