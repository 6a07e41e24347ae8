"""Thin owning wrappers over llama-cpp-python's low-level ctypes API.

Every native handle has one owner with an idempotent ``close()``. Global llama.cpp set-up
(backend init, log routing) happens once per process, in :func:`init_backend`.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp as ll
import numpy as np
import numpy.typing as npt

from . import cpu_check
from .errors import DecodeError, ModelLoadError

log = logging.getLogger(__name__)
_native_log = logging.getLogger("engine.llama_cpp")

GGUF_MAGIC = b"GGUF"
_GGML_LEVELS = {0: logging.CRITICAL, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}

_init_lock = threading.Lock()
_initialised = False
_last_level = logging.DEBUG


@ll.llama_log_callback  # type: ignore[untyped-decorator]
def _log_callback(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
    # WORKAROUND: the callback llama_cpp installs on import maps ggml levels wrongly (DEBUG=1, INFO=2,
    # WARN=3, ERROR=4 in ggml.h) and prints every line to stderr.
    global _last_level
    lvl = _last_level if level == 5 else _GGML_LEVELS.get(level, logging.DEBUG)
    _last_level = lvl
    if _native_log.isEnabledFor(lvl):
        _native_log.log(lvl, "%s", text.decode("utf-8", "replace").rstrip("\n"))


def init_backend() -> None:
    """Initialise llama.cpp once per process and route its log lines into :mod:`logging`."""
    global _initialised
    with _init_lock:
        if _initialised:
            return
        ll.llama_log_set(_log_callback, ctypes.c_void_p(0))
        ll.llama_backend_init()
        _initialised = True


def supports_gpu_offload() -> bool:
    """Whether this build of llama.cpp can put layers on a GPU."""
    init_backend()
    return bool(ll.llama_supports_gpu_offload())


def check_gguf_file(path: Path) -> None:
    """Raise :class:`ModelLoadError` unless ``path`` looks like a complete GGUF file."""
    if not path.exists():
        raise ModelLoadError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelLoadError(f"model path is not a file: {path}")
    size = path.stat().st_size
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != GGUF_MAGIC:
        raise ModelLoadError(f"not a GGUF file (bad magic {magic!r}): {path}")
    if size < 64:
        raise ModelLoadError(f"GGUF file is truncated ({size} bytes): {path}")


class Model:
    """A loaded GGUF model and its vocabulary (read-only, shareable across threads)."""

    def __init__(self, path: str | os.PathLike[str], *, gpu_layers: int = 0, vocab_only: bool = False) -> None:
        self._ptr: Any = None
        self.path = Path(path)
        check_gguf_file(self.path)
        init_backend()
        mp = ll.llama_model_default_params()
        mp.n_gpu_layers = gpu_layers
        mp.vocab_only = vocab_only
        mp.use_extra_bufts = cpu_check.extra_bufts_allowed()  # False where the CPU faults in AMX/repack kernels
        ptr = ll.llama_model_load_from_file(str(self.path).encode(), mp)
        if not ptr:
            raise ModelLoadError(f"llama.cpp could not load the model (truncated or unsupported GGUF?): {self.path}")
        self._ptr = ptr
        self.vocab = ll.llama_model_get_vocab(ptr)
        self.n_vocab: int = ll.llama_vocab_n_tokens(self.vocab)
        self.bos: int = ll.llama_vocab_bos(self.vocab)
        self.eos: int = ll.llama_vocab_eos(self.vocab)
        self.add_bos: bool = bool(ll.llama_vocab_get_add_bos(self.vocab))
        self.add_eos: bool = bool(ll.llama_vocab_get_add_eos(self.vocab))
        self.vocab_type: int = ll.llama_vocab_type(self.vocab)
        self.n_ctx_train: int = ll.llama_model_n_ctx_train(ptr)
        self._eog = np.zeros(self.n_vocab, dtype=bool)
        for t in range(self.n_vocab):
            if ll.llama_vocab_is_eog(self.vocab, t):
                self._eog[t] = True

    @property
    def ptr(self) -> Any:
        if not self._ptr:
            raise RuntimeError("model is closed")
        return self._ptr

    def close(self) -> None:
        if self._ptr:
            ll.llama_model_free(self._ptr)
            self._ptr = None

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- vocabulary -------------------------------------------------------------------------
    def is_eog(self, token: int) -> bool:
        return bool(self._eog[token]) if 0 <= token < self.n_vocab else False

    def token_text(self, token: int) -> bytes:
        raw = ll.llama_vocab_get_text(self.vocab, token)
        return bytes(raw) if raw is not None else b""

    def token_bytes(self, token: int, *, special: bool = False) -> bytes:
        """The bytes a token renders to; may be part of a multi-byte UTF-8 character."""
        buf = ctypes.create_string_buffer(64)
        n = ll.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = ll.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        return buf.raw[:n]

    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = False) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 16
        out = (ll.llama_token * cap)()
        n = ll.llama_tokenize(self.vocab, data, len(data), out, cap, add_special, parse_special)
        if n < 0:
            cap = -n
            out = (ll.llama_token * cap)()
            n = ll.llama_tokenize(self.vocab, data, len(data), out, cap, add_special, parse_special)
        return list(out[:n])

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", "replace")

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(4096)
        n = ll.llama_model_meta_val_str(self.ptr, key.encode(), buf, len(buf))
        if n < 0:
            return None
        if n >= len(buf):
            buf = ctypes.create_string_buffer(n + 1)
            ll.llama_model_meta_val_str(self.ptr, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", "replace")

    def chat_template(self) -> str | None:
        raw = ll.llama_model_chat_template(self.ptr, None)
        return raw.decode("utf-8") if raw else None

    def piece_for(self, token: int) -> str:
        """Best-effort text of one token, for labels (special tokens rendered)."""
        return self.token_bytes(token, special=True).decode("utf-8", "replace")


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


class Context:
    """A llama.cpp context (KV cache) over one model, with its own reusable batch.

    Not thread-safe: one thread uses a context at a time.
    """

    def __init__(self, model: Model, params: ContextParams) -> None:
        self._ptr: Any = None
        self._batch: Any = None
        self.model = model
        self.params = params
        cp = ll.llama_context_default_params()
        cp.n_ctx = params.n_ctx
        cp.n_batch = params.n_batch
        cp.n_ubatch = params.n_batch
        cp.n_seq_max = params.n_seq_max
        cp.n_outputs_max = max(params.n_batch, params.n_seq_max)
        cp.kv_unified = params.kv_unified
        cp.n_threads = params.n_threads
        cp.n_threads_batch = params.n_threads_batch
        cp.flash_attn_type = 1 if params.flash_attn else 0
        cp.no_perf = True
        ptr = ll.llama_init_from_model(model.ptr, cp)
        if not ptr:
            raise ModelLoadError(f"could not create a llama.cpp context (n_ctx={params.n_ctx}) for {model.path}")
        self._ptr = ptr
        self.n_ctx: int = ll.llama_n_ctx(ptr)
        # llama.cpp clamps n_batch to n_ctx; a batch above the real size aborts the process.
        self.n_batch: int = min(params.n_batch, ll.llama_n_batch(ptr), ll.llama_n_ubatch(ptr))
        self.mem = ll.llama_get_memory(ptr)
        nb = self.n_batch
        self._batch = ll.llama_batch_init(nb, 0, max(1, params.n_seq_max))
        b = self._batch
        self._tok = np.ctypeslib.as_array(b.token, shape=(nb,))
        self._pos = np.ctypeslib.as_array(b.pos, shape=(nb,))
        self._nseq = np.ctypeslib.as_array(b.n_seq_id, shape=(nb,))
        self._out = np.ctypeslib.as_array(ctypes.cast(b.logits, ctypes.POINTER(ctypes.c_int8)), shape=(nb,))
        self._seq_ptrs = [b.seq_id[i] for i in range(nb)]
        self.n_vocab = model.n_vocab
        self.decode_seconds = 0.0  # time spent inside llama_decode, for per-phase accounting

    def close(self) -> None:
        if self._batch is not None:
            ll.llama_batch_free(self._batch)
            self._batch = None
        if self._ptr:
            ll.llama_free(self._ptr)
            self._ptr = None

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_threads(self, n_threads: int, n_threads_batch: int) -> None:
        ll.llama_set_n_threads(self._ptr, n_threads, n_threads_batch)

    # -- decoding ---------------------------------------------------------------------------
    def decode(
        self,
        tokens: Sequence[int],
        positions: Sequence[int],
        seq_ids: Sequence[int] | int = 0,
        outputs: Sequence[int] | None = None,
    ) -> npt.NDArray[np.float32]:
        """Decode one batch and return copies of the logits rows for the batch indices in ``outputs``.

        ``seq_ids`` is one sequence id for every token or one per token. Rows come back in the order
        of ``outputs`` (default: only the last token).
        """
        n = len(tokens)
        if n == 0:
            return np.empty((0, self.n_vocab), dtype=np.float32)
        if n > self.n_batch:
            raise DecodeError(f"batch of {n} tokens exceeds n_batch={self.n_batch}")
        if outputs is None:
            outputs = [n - 1]
        self._tok[:n] = tokens
        self._pos[:n] = positions
        self._nseq[:n] = 1
        self._out[:n] = 0
        self._out[list(outputs)] = 1
        if isinstance(seq_ids, int):
            for i in range(n):
                self._seq_ptrs[i][0] = seq_ids
        else:
            for i in range(n):
                self._seq_ptrs[i][0] = seq_ids[i]
        self._batch.n_tokens = n
        t0 = time.perf_counter()
        rc = ll.llama_decode(self._ptr, self._batch)
        self.decode_seconds += time.perf_counter() - t0
        if rc == 1:
            raise DecodeError("the context is full (no free KV slot); start a new chat or raise the context length")
        if rc != 0:
            raise DecodeError(f"llama_decode failed with code {rc}")
        rows = np.empty((len(outputs), self.n_vocab), dtype=np.float32)
        for r, i in enumerate(outputs):
            p = ll.llama_get_logits_ith(self._ptr, i)
            if not p:
                raise DecodeError(f"no logits for batch index {i}")
            rows[r] = np.ctypeslib.as_array(p, shape=(self.n_vocab,))
        return rows

    def prefill(self, tokens: Sequence[int], start: int, seq_id: int = 0) -> npt.NDArray[np.float32]:
        """Decode ``tokens`` at positions ``start..`` in chunks of n_batch; return the last row."""
        last = np.empty((0, self.n_vocab), dtype=np.float32)
        step = self.n_batch
        for i in range(0, len(tokens), step):
            chunk = tokens[i : i + step]
            want = [len(chunk) - 1] if i + step >= len(tokens) else []
            pos = range(start + i, start + i + len(chunk))
            if want:
                last = self.decode(chunk, pos, seq_id, want)
            else:
                self._decode_no_output(chunk, pos, seq_id)
        return last[0] if len(last) else np.empty(0, dtype=np.float32)

    def _decode_no_output(self, tokens: Sequence[int], positions: Sequence[int], seq_id: int) -> None:
        n = len(tokens)
        if n > self.n_batch:
            raise DecodeError(f"batch of {n} tokens exceeds n_batch={self.n_batch}")
        self._tok[:n] = tokens
        self._pos[:n] = positions
        self._nseq[:n] = 1
        self._out[:n] = 0
        for i in range(n):
            self._seq_ptrs[i][0] = seq_id
        self._batch.n_tokens = n
        t0 = time.perf_counter()
        rc = ll.llama_decode(self._ptr, self._batch)
        self.decode_seconds += time.perf_counter() - t0
        if rc != 0:
            raise DecodeError(
                "the context is full; start a new chat or raise the context length"
                if rc == 1
                else f"llama_decode failed with code {rc}"
            )

    # -- memory -----------------------------------------------------------------------------
    def seq_rm(self, seq: int, p0: int, p1: int = -1) -> bool:
        return bool(ll.llama_memory_seq_rm(self.mem, seq, p0, p1))

    def seq_cp(self, src: int, dst: int, p0: int, p1: int = -1) -> None:
        ll.llama_memory_seq_cp(self.mem, src, dst, p0, p1)

    def seq_keep(self, seq: int) -> None:
        ll.llama_memory_seq_keep(self.mem, seq)

    def seq_pos_max(self, seq: int) -> int:
        return int(ll.llama_memory_seq_pos_max(self.mem, seq))

    def clear(self) -> None:
        ll.llama_memory_clear(self.mem, True)
