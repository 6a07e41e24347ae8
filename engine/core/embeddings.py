"""Embeddings from a loaded model: a llama.cpp context of its own over the model's weights, with pooling.

The context is made for one batch of inputs and freed after it (it never outlives the model it reads, and holds
no memory between requests). Pooling is the model's own where its file declares one (an embedding model), else
the mean of the last hidden states over the input's tokens (a chat model). Each vector is scaled to unit length,
as OpenAI's embeddings are, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import llama_cpp as ll
import numpy as np

from engine.errors import DecodeError, ModelLoadError

from .backend import Model

MAX_TOKENS = 512  # tokens per input: the whole input is one batch, whose every token is an output row
MAX_INPUTS = 256  # inputs per request: the engine is held for all of them
POOLED = (ll.LLAMA_POOLING_TYPE_MEAN, ll.LLAMA_POOLING_TYPE_CLS, ll.LLAMA_POOLING_TYPE_LAST)
TASK = "engine.core.embeddings:task"


class Embedder:
    """One pooled embeddings context over ``model``; use it as a context manager (it frees its context)."""

    def __init__(self, model: Model, n_threads: int) -> None:
        self.model = model
        self._ptr: Any = None
        self._batch: Any = None
        self._ptr = self._context(n_threads, pooling(model))
        self.n_embd = int(ll.llama_model_n_embd(model.ptr))
        self._batch = ll.llama_batch_init(MAX_TOKENS, 0, 1)

    def _context(self, n_threads: int, pooling: int) -> Any:
        cp = ll.llama_context_default_params()
        cp.n_ctx = cp.n_batch = cp.n_ubatch = cp.n_outputs_max = MAX_TOKENS
        cp.n_seq_max = 1
        cp.n_threads = cp.n_threads_batch = max(1, n_threads)
        cp.embeddings = True
        cp.pooling_type = pooling
        cp.no_perf = True
        ptr = ll.llama_init_from_model(self.model.ptr, cp)
        if not ptr:
            raise ModelLoadError(f"could not create an embeddings context for {self.model.path}")
        return ptr

    def embed(self, tokens: Sequence[int]) -> list[float]:
        """The unit-length vector of one input (1 to :data:`MAX_TOKENS` tokens)."""
        if not 0 < len(tokens) <= MAX_TOKENS:
            raise ValueError(f"an input must have 1 to {MAX_TOKENS} tokens, got {len(tokens)}")
        ll.llama_memory_clear(ll.llama_get_memory(self._ptr), True)
        b = self._batch
        for i, tok in enumerate(tokens):  # every token an output: pooling reads them all
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = tok, i, 1, 1
            b.seq_id[i][0] = 0
        b.n_tokens = len(tokens)
        if ll.llama_decode(self._ptr, b) != 0:
            raise DecodeError("llama.cpp could not read an input for its embedding")
        at = ll.llama_get_embeddings_seq(self._ptr, 0)
        if not at:
            raise DecodeError("llama.cpp returned no pooled embedding")
        vec = np.ctypeslib.as_array(at, shape=(self.n_embd,)).astype(np.float64)
        norm = float(np.linalg.norm(vec))
        return [float(v) for v in (vec / norm if norm > 0 else vec)]

    def close(self) -> None:
        if self._batch is not None:
            ll.llama_batch_free(self._batch)
            self._batch = None
        if self._ptr:
            ll.llama_free(self._ptr)
            self._ptr = None

    def __enter__(self) -> Embedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pooling(model: Model) -> int:
    """The pooling the model's file declares where it is one that pools (an embedding model), else the mean."""
    declared = model.meta(f"{model.meta('general.architecture') or ''}.pooling_type")
    kind = int(declared) if declared is not None and declared.strip().isdigit() else ll.LLAMA_POOLING_TYPE_NONE
    return kind if kind in POOLED else ll.LLAMA_POOLING_TYPE_MEAN


def task(engine: Any, inputs: Sequence[Sequence[int]], stop: threading.Event,
         report: Callable[[object], None]) -> list[list[float]]:
    """The vectors of ``inputs`` (token lists) from ``engine``'s target; also run as a task in the engine process.
    Each finished input is reported (its index); a stop ends the batch between inputs."""
    out: list[list[float]] = []
    with Embedder(engine.target_model, engine.target_ctx.params.n_threads) as emb:
        for i, tokens in enumerate(inputs):
            if stop.is_set():
                raise DecodeError("the embeddings were stopped")
            out.append(emb.embed(tokens))
            report(i)
    return out
