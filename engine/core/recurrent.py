"""A model's recurrent state: whether its memory has one, and how many trailing positions llama.cpp can give back."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import llama_cpp as ll

from .options import MAX_K

# The vendored llama.cpp's llm_arch_supports_rs_rollback (src/llama-arch.cpp): n_rs_seq is clamped to 0 for others.
ROLLBACK_ARCHS = frozenset({
    "kimi-k3", "qwen35", "qwen35moe", "qwen4exp", "deepseek4", "glm5-next", "nemotron_h", "nemotron_h_moe", "lfm2",
    "lfm2moe", "bailingmoe3",
})
# Snapshots per sequence: a verify batch of K+1 tokens gives back at most K (every draft rejected).
ROLLBACK_DEPTH = MAX_K
# Spare sequences a recurrent context keeps for checkpoints: the round's start, and the prompt's end.
ROUND, PROMPT = 0, 1
SPARE_SEQS = 2


@dataclass(frozen=True, slots=True)
class MemoryKind:
    """What a context's memory can undo: ``recurrent`` (part of it is a recurrent state, which never shrinks by
    itself), ``rollback`` (trailing positions its last decode of a sequence leaves removable, 0 for none)."""

    arch: str = ""
    recurrent: bool = False
    rollback: int = 0

    @property
    def checkpoints(self) -> bool:
        """Whether its sequences need checkpoints to go back further than ``rollback`` positions."""
        return self.recurrent


def architecture(model: Any) -> str:
    """The GGUF's ``general.architecture`` (empty when unreadable)."""
    buf = ctypes.create_string_buffer(128)
    n = ll.llama_model_meta_val_str(model, b"general.architecture", buf, len(buf))
    return buf.value.decode("utf-8", "replace") if n > 0 else ""


def memory_kind(model: Any) -> MemoryKind:
    """The memory a context over ``model`` (a llama_model pointer) gets."""
    recurrent = bool(ll.llama_model_is_recurrent(model)) or bool(ll.llama_model_is_hybrid(model))
    arch = architecture(model)
    rollback = ROLLBACK_DEPTH if recurrent and arch in ROLLBACK_ARCHS else 0
    return MemoryKind(arch, recurrent, rollback)
