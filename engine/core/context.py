"""A llama.cpp context (KV cache) over one model, its batched decode, and sequence 0's token record."""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import llama_cpp as ll
import numpy as np
import numpy.typing as npt

from engine.errors import ContextFullError, DecodeError, ModelLoadError, ParameterError, PrefillStopped

from .backend import Model
from .options import MAX_K
from .outputs import PATHS, BackendSamplers, ChainSpec, Outputs, choose_path
from .recurrent import SPARE_SEQS, memory_kind
from .sampling import SamplingParams

FULL = "the context is full (no free KV slot); start a new chat or raise the context length"


@dataclass(frozen=True, slots=True)
class ContextParams:
    """How to size and run one llama.cpp context."""

    n_ctx: int = 4096
    n_batch: int = 512
    n_seq_max: int = 1
    kv_unified: bool = False
    n_threads: int = 1
    n_threads_batch: int = 1
    flash_attn: bool = True
    sampling: str = "auto"  # where rounds sample: auto, host or backend (engine.core.outputs.choose_path)


class Context:
    """A llama.cpp context (KV cache) over one model, with its own reusable batch.

    Not thread-safe: one thread uses a context at a time.
    """

    def __init__(self, model: Model, params: ContextParams) -> None:
        self._ptr: Any = None
        self._batch: Any = None
        if params.sampling not in PATHS:
            raise ParameterError(f"sampling path must be one of {', '.join(PATHS)}, got {params.sampling!r}")
        self.model = model
        self.params = params
        self.kind = memory_kind(model.ptr)
        # a recurrent state keeps checkpoints in spare sequences, which share one KV buffer with sequence 0
        n_seq = params.n_seq_max + (SPARE_SEQS if self.kind.checkpoints else 0)
        self.spare = tuple(range(params.n_seq_max, n_seq))
        self.removable: dict[int, int] = {}  # per sequence: trailing positions llama.cpp can give back now
        cp = ll.llama_context_default_params()
        cp.n_ctx = params.n_ctx
        cp.n_batch = params.n_batch
        cp.n_ubatch = params.n_batch
        cp.n_seq_max = n_seq
        cp.n_rs_seq = self.kind.rollback
        cp.n_outputs_max = max(params.n_batch, n_seq)
        cp.n_outputs_max_per_seq = MAX_K + 1  # a verify batch (K+1 rows) under a backend sampler
        cp.kv_unified = params.kv_unified or bool(self.spare)
        cp.n_threads = params.n_threads
        cp.n_threads_batch = params.n_threads_batch
        cp.flash_attn_type = 1 if params.flash_attn else 0
        cp.no_perf = True
        ptr = ll.llama_init_from_model(model.ptr, cp)
        if not ptr:
            raise ModelLoadError(f"could not create a llama.cpp context (n_ctx={params.n_ctx}) for {model.path}")
        self._ptr = ptr
        self.n_ctx: int = ll.llama_n_ctx(ptr)
        self.n_ctx_seq: int = ll.llama_n_ctx_seq(ptr)  # what one sequence may hold (n_ctx split over separate ones)
        # llama.cpp clamps n_batch to n_ctx; a batch above the real size aborts the process.
        self.n_batch: int = min(params.n_batch, ll.llama_n_batch(ptr), ll.llama_n_ubatch(ptr))
        self.mem = ll.llama_get_memory(ptr)
        self.threads = (params.n_threads, params.n_threads_batch)
        nb = self.n_batch
        self._batch = ll.llama_batch_init(nb, 0, max(1, n_seq))
        b = self._batch
        self._tok = np.ctypeslib.as_array(b.token, shape=(nb,))
        self._pos = np.ctypeslib.as_array(b.pos, shape=(nb,))
        self._nseq = np.ctypeslib.as_array(b.n_seq_id, shape=(nb,))
        self._out = np.ctypeslib.as_array(ctypes.cast(b.logits, ctypes.POINTER(ctypes.c_int8)), shape=(nb,))
        self._seq_ptrs = [b.seq_id[i] for i in range(nb)]
        self.n_vocab = model.n_vocab
        self.decode_seconds = 0.0  # time spent inside llama_decode, for per-phase accounting
        self.decode_cpu_seconds = 0.0  # CPU time of the calling thread inside llama_decode (load-independent)
        self.n_decodes = 0  # outputs of an earlier decode are stale once this moves on
        # a batch shape new to the context builds its graph first (over RPC, round trips): not its width's time
        self._shapes: set[tuple[int, int, ChainSpec | None]] = set()
        self.new_shape = False
        self.samplers = BackendSamplers(ptr, max(1, params.n_seq_max))
        # Whether a decode waits for the device before its time is counted, so the getters after it time host
        # work only (a CPU decode has finished when it returns)
        self.synchronizes = self.on_gpu

    def close(self) -> None:
        if self._batch is not None:
            ll.llama_batch_free(self._batch)
            self._batch = None
        if self._ptr:
            ll.llama_free(self._ptr)
            self._ptr = None
            self.samplers.close()

    @property
    def on_gpu(self) -> bool:
        """Whether the model's logits are made on an accelerator (where rows are costly to bring back)."""
        return bool(self.model.output_on_gpu)

    def sampling_path(self, params: SamplingParams) -> str:
        """host or backend for ``params`` on this context (see :func:`~engine.core.outputs.choose_path`)."""
        return choose_path(self.params.sampling, params, self.on_gpu)

    def set_sampling(self, spec: ChainSpec | None) -> None:
        """Sample inside llama.cpp with ``spec``'s chain on every sequence (None: the host path, logits rows); a
        new chain's first decode builds its graph (:attr:`new_shape`): set it once per generation."""
        self.samplers.attach(spec)

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_threads(self, n_threads: int, n_threads_batch: int) -> None:
        if (n_threads, n_threads_batch) != self.threads:  # every sequence's rounds share the context's threads
            ll.llama_set_n_threads(self._ptr, n_threads, n_threads_batch)
            self.threads = (n_threads, n_threads_batch)

    def decode_out(
        self,
        tokens: Sequence[int],
        positions: Sequence[int],
        seq_ids: Sequence[int] | int = 0,
        outputs: Sequence[int] | None = None,
    ) -> Outputs:
        """Decode one batch; the rows for the batch indices in ``outputs`` (default: the last token) are
        read where they lie, through :class:`Outputs`, until the next decode. No row is copied."""
        n = len(tokens)
        if outputs is None:
            outputs = [n - 1] if n else []
        self._run(tokens, positions, seq_ids, outputs)
        return self.outputs(outputs)

    def outputs(self, indices: Sequence[int]) -> Outputs:
        """The last decode's outputs at batch ``indices`` (one sequence's share of a batch)."""
        return Outputs(self._ptr, indices, self.n_vocab, self.samplers.spec, self._stamp)

    def _stamp(self) -> int:
        return self.n_decodes

    def decode(
        self,
        tokens: Sequence[int],
        positions: Sequence[int],
        seq_ids: Sequence[int] | int = 0,
        outputs: Sequence[int] | None = None,
    ) -> npt.NDArray[np.float32]:
        """Decode one batch and return copies of the logits rows for the batch indices in ``outputs``.

        ``seq_ids`` is one sequence id for every token or one per token. Rows come back in the order
        of ``outputs`` (default: only the last token). Always real logits: an attached backend sampler
        is set aside for this call (slow; for checks and tests, not for rounds).
        """
        if len(tokens) == 0:
            return np.empty((0, self.n_vocab), dtype=np.float32)
        spec = self.samplers.spec
        self.samplers.attach(None)
        try:
            out = self.decode_out(tokens, positions, seq_ids, outputs)
            return np.stack([out.row(r) for r in range(len(out))])
        finally:
            self.samplers.attach(spec)

    def _run(self, tokens: Sequence[int], positions: Sequence[int], seq_ids: Sequence[int] | int,
             outputs: Sequence[int]) -> None:
        n = len(tokens)
        if n == 0:
            return
        if n > self.n_batch:
            raise DecodeError(f"batch of {n} tokens exceeds n_batch={self.n_batch}")
        if n <= 8:  # a round's batch: ctypes stores cost less than numpy's conversion of a short list
            b = self._batch
            tok, pos, nseq, out = b.token, b.pos, b.n_seq_id, b.logits
            for i in range(n):
                tok[i], pos[i], nseq[i], out[i] = tokens[i], positions[i], 1, 0
            for i in outputs:
                out[i] = 1
        else:
            self._tok[:n] = tokens
            self._pos[:n] = positions
            self._nseq[:n] = 1
            self._out[:n] = 0
            for i in outputs:
                self._out[i] = 1
        ptrs = self._seq_ptrs
        if isinstance(seq_ids, int):
            for i in range(n):
                ptrs[i][0] = seq_ids
        else:
            for i in range(n):
                ptrs[i][0] = seq_ids[i]
        self._batch.n_tokens = n
        shape = (n, len(outputs), self.samplers.spec)
        self.new_shape = shape not in self._shapes
        self._shapes.add(shape)
        t0, c0 = time.perf_counter(), time.thread_time()
        rc = ll.llama_decode(self._ptr, self._batch)  # a remote gone silent: engine.remote.deadline ends the process
        if self.synchronizes:  # a GPU decode returns before the device is done: its wait is llama.cpp time
            ll.llama_synchronize(self._ptr)
        self.decode_seconds += time.perf_counter() - t0
        self.decode_cpu_seconds += time.thread_time() - c0
        self.n_decodes += 1
        if self.kind.rollback:  # the last decode's snapshots: its own tokens, once (llama.cpp checks neither)
            for s in {seq_ids} if isinstance(seq_ids, int) else set(seq_ids):
                self.removable[s] = 0 if rc else min(self.kind.rollback, n if isinstance(seq_ids, int)
                                                     else sum(1 for x in seq_ids if x == s))
        if rc == 1:
            raise ContextFullError(FULL)
        if rc != 0:
            raise DecodeError(f"llama_decode failed with code {rc}")

    def prefill_out(self, tokens: Sequence[int], start: int, seq_id: int = 0,
                    stop: Callable[[], bool] | None = None, step: int = 0) -> Outputs:
        """Decode ``tokens`` at positions ``start..`` in chunks of ``step`` (0: n_batch); the last token's output.
        ``stop`` is asked before each chunk: true raises :class:`PrefillStopped` (the chunks decoded stay in the KV)."""
        step = min(step or self.n_batch, self.n_batch)
        if not tokens:
            raise DecodeError("nothing to prefill")
        last = (len(tokens) - 1) // step * step
        for i in range(0, last + 1, step):
            if stop is not None and stop():
                raise PrefillStopped(i)
            if i < last:
                self._run(tokens[i : i + step], range(start + i, start + i + step), seq_id, [])
        chunk = tokens[last:]
        return self.decode_out(chunk, range(start + last, start + last + len(chunk)), seq_id, [len(chunk) - 1])

    def prefill(self, tokens: Sequence[int], start: int, seq_id: int = 0) -> npt.NDArray[np.float32]:
        """:meth:`prefill_out`, returning a copy of the last row's logits (real logits; see :meth:`decode`)."""
        if not tokens:
            return np.empty(0, dtype=np.float32)
        spec = self.samplers.spec
        self.samplers.attach(None)
        try:
            return self.prefill_out(tokens, start, seq_id).row(0).copy()
        finally:
            self.samplers.attach(spec)

    # -- memory -----------------------------------------------------------------------------
    def seq_rm(self, seq: int, p0: int, p1: int = -1) -> bool:
        """Remove [p0, p1) of ``seq``; False where the memory cannot (a recurrent state cut back further than
        its last decode's snapshots), the memory then unchanged."""
        if self.kind.recurrent and p0 > 0 and p1 < 0:
            cut = self.seq_pos_max(seq) + 1 - p0
            if cut > self.removable.get(seq, 0):
                return cut <= 0
        ok = bool(ll.llama_memory_seq_rm(self.mem, seq, p0, p1))
        self.removable[seq] = 0
        return ok

    def seq_cp(self, src: int, dst: int, p0: int, p1: int = -1) -> None:
        ll.llama_memory_seq_cp(self.mem, src, dst, p0, p1)
        self.removable[src] = self.removable[dst] = 0  # a shared recurrent cell is never rolled back

    def seq_keep(self, seq: int) -> None:
        ll.llama_memory_seq_keep(self.mem, seq)

    def seq_pos_max(self, seq: int) -> int:
        return int(ll.llama_memory_seq_pos_max(self.mem, seq))

    def clear(self) -> None:
        ll.llama_memory_clear(self.mem, True)
        self.removable.clear()


__all__ = ["FULL", "Context", "ContextParams"]
