"""Thin owning wrappers over llama-cpp-python's low-level ctypes API: the model.

Every native handle has one owner with an idempotent ``close()``. Global llama.cpp set-up
(backend init, log routing) happens once per process, in :func:`engine.native.startup.init_backend`.
Contexts (KV caches) are in :mod:`engine.core.context`.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import llama_cpp as ll
import numpy as np

from engine.errors import ModelLoadError, ParameterError
from engine.native import bufts
from engine.native.offload import supports_gpu_offload
from engine.native.startup import init_backend

from . import cpu_check, placement
from .devices import check_split, device_list, shares
from .gguffile import check_gguf_file
from .options import AUTO_LAYERS, N_CTX

log = logging.getLogger(__name__)

def _extra_bufts() -> bool:
    """Apply the CPU check's verdict to llama.cpp's extra CPU buffer types; True to load with them.

    A verdict that drops some types (AMX on a CPU that faults in it) keeps the others (CPU_REPACK);
    where they cannot be dropped in this build, no extra type is used at all.
    """
    allowed, drop = cpu_check.extra_bufts_plan()
    if not allowed:
        return False
    try:
        bufts.use_all_but(drop)
    except bufts.BuftError as exc:
        if drop:
            log.warning("cannot drop llama.cpp's %s buffer type (%s); loading without extra buffer types",
                        ", ".join(drop), exc)
            return False
    return True


def _shown(char: str) -> str:
    try:
        return f"byte {char.encode('utf-8', 'surrogateescape')!r}"
    except UnicodeEncodeError:
        return f"character U+{ord(char):04X}"


class Model:
    """A loaded GGUF model and its vocabulary (read-only, shareable across threads)."""

    def __init__(self, path: str | os.PathLike[str], *, gpu_layers: int = 0, vocab_only: bool = False,
                 remote: Sequence[str] = (), split: Sequence[float] = ()) -> None:
        """``gpu_layers``: layers on the GPU as llama.cpp takes them (-1 = all), or AUTO_LAYERS for every layer
        that fits in the GPU's free memory now (:mod:`engine.core.placement`; a caller placing two models
        resolves it first, with both in view). ``remote``: HOST:PORT of RPC servers whose devices take the
        offloaded layers instead of this machine's GPUs; ``split``: each of their devices' share (empty: by free
        memory)."""
        self._ptr: Any = None
        self.path = Path(path)
        check_gguf_file(self.path)
        init_backend()
        if gpu_layers == AUTO_LAYERS:
            gpu_layers = 0 if vocab_only else placement.place_layers(self.path, None, AUTO_LAYERS, 0,
                                                                     N_CTX.default).target_layers
        mp = ll.llama_model_default_params()
        mp.n_gpu_layers = gpu_layers
        mp.vocab_only = vocab_only
        mp.use_extra_bufts = False if vocab_only else _extra_bufts()
        devices = None if vocab_only else device_list(remote)  # kept alive until the load returns
        if devices is not None:
            mp.devices = devices.address
        split_at = None  # kept alive until the load returns
        if devices is not None and devices.remote:
            split_at = shares(devices, split, gpu_layers, self.path)
            mp.tensor_split = ctypes.cast(split_at, ctypes.POINTER(ctypes.c_float))
        elif split:
            check_split(split, 0)
        ptr = ll.llama_model_load_from_file(os.fsencode(self.path), mp)
        if not ptr:
            raise ModelLoadError(f"llama.cpp could not load the model (truncated or unsupported GGUF?): {self.path}")
        self._ptr = ptr
        self.gpu_layers = gpu_layers
        self.remote = tuple(remote) if devices is not None and devices.remote else ()
        self.gpu_capable = bool(self.remote) or supports_gpu_offload()  # a CPU-only build ignores gpu_layers
        # Where the logits are made: a remote model's output layer is at home (engine.core.devices)
        self.output_on_gpu = (gpu_layers != 0 and self.gpu_capable
                              and not (devices is not None and devices.remote and devices.home_is_cpu))
        self.n_layers: int = ll.llama_model_n_layer(ptr)
        self.vocab = ll.llama_model_get_vocab(ptr)
        self.n_vocab: int = ll.llama_vocab_n_tokens(self.vocab)
        self.bos: int = ll.llama_vocab_bos(self.vocab)
        self.eos: int = ll.llama_vocab_eos(self.vocab)
        self.add_bos: bool = bool(ll.llama_vocab_get_add_bos(self.vocab))
        self.add_eos: bool = bool(ll.llama_vocab_get_add_eos(self.vocab))
        self.vocab_type: int = ll.llama_vocab_type(self.vocab)
        self.n_ctx_train: int = ll.llama_model_n_ctx_train(ptr)
        self._pieces: dict[tuple[int, bool], bytes] = {}
        self._eog = np.zeros(self.n_vocab, dtype=bool)
        for t in range(self.n_vocab):
            if ll.llama_vocab_is_eog(self.vocab, t):
                self._eog[t] = True
        self._specials: dict[int, int] | None = None

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
    def add_eog(self, tokens: Iterable[int]) -> None:
        """Count ``tokens`` as ends of generation too (a chat format's turn ends the vocabulary does not mark)."""
        for t in tokens:
            if 0 <= t < self.n_vocab:
                self._eog[t] = True

    def is_eog(self, token: int) -> bool:
        return bool(self._eog[token]) if 0 <= token < self.n_vocab else False

    def token_text(self, token: int) -> bytes:
        raw = ll.llama_vocab_get_text(self.vocab, token)
        return bytes(raw) if raw is not None else b""

    def token_bytes(self, token: int, *, special: bool = False) -> bytes:
        """The bytes a token renders to; may be part of a multi-byte UTF-8 character (kept once looked up:
        the reply loop asks for every token it emits)."""
        key = (token, special)
        piece = self._pieces.get(key)
        if piece is None:
            buf = ctypes.create_string_buffer(64)
            n = ll.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = ll.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
            piece = self._pieces[key] = buf.raw[:n]
        return piece

    def special_tokens(self) -> dict[int, int]:
        """Token -> attributes of every token llama.cpp's tokenizer matches by its text before splitting
        words (control, user-defined and unknown tokens); control and unknown ones only with parse_special."""
        if self._specials is None:
            mask = ll.LLAMA_TOKEN_ATTR_CONTROL | ll.LLAMA_TOKEN_ATTR_USER_DEFINED | ll.LLAMA_TOKEN_ATTR_UNKNOWN
            attrs = ((t, int(ll.llama_vocab_get_attr(self.vocab, t))) for t in range(self.n_vocab))
            self._specials = {t: a for t, a in attrs if a & mask}
        return self._specials

    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = False) -> list[int]:
        """Token ids of ``text``; :class:`ParameterError` if it holds characters UTF-8 cannot encode."""
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:  # lone surrogates: undecodable bytes of a command line, a file
            raise ParameterError(
                f"the text is not valid UTF-8 (undecodable {_shown(text[exc.start])} at character {exc.start})"
            ) from None
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

    def chat_template(self, name: str | None = None) -> str | None:
        """The GGUF's default chat template, or its named one (``tool_use``: ``tokenizer.chat_template.tool_use``,
        which converted models that ship two templates keep for tool calls); None where the file has none."""
        raw = ll.llama_model_chat_template(self.ptr, name.encode() if name else None)
        return raw.decode("utf-8", "replace") if raw else None

    def piece_for(self, token: int) -> str:
        """Best-effort text of one token, for labels (special tokens rendered)."""
        return self.token_bytes(token, special=True).decode("utf-8", "replace")


def loaded(target: Model, draft: Model | None) -> placement.Placement:
    """The placement of models as they were loaded (their resolved GPU layers)."""
    return placement.Placement(target.gpu_layers, draft.gpu_layers if draft is not None else 0, target.n_layers,
                               draft.n_layers if draft is not None else 0, target.gpu_capable, draft is not None,
                               remote=target.remote)
