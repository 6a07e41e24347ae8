"""Which architectures keep a recurrent state, and what speculation costs on each, from a GGUF's header alone.

The model manager and ``models drafts`` read ``general.architecture`` (one header block) and say how a model
goes back after a rejected draft (docs/recurrent.md): attention-only models drop the KV cache's tail for
nothing, the architectures llama.cpp rolls back keep ``n_rs_seq`` snapshots, the other recurrent and hybrid
ones go back to a checkpoint and decode the accepted tokens again. Any of them pairs with any draft of the same
vocabulary: a hybrid target with an attention-only draft is a valid pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.core.recurrent import ROLLBACK_ARCHS, ROLLBACK_DEPTH

from . import gguf_remote

# The vendored llama.cpp's llm_arch_is_recurrent and llm_arch_is_hybrid (src/llama-arch.cpp).
RECURRENT_ARCHS = frozenset({"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})
HYBRID_ARCHS = frozenset({
    "jamba", "falcon-h1", "plamo2", "granitehybrid", "lfm2", "lfm2moe", "nemotron_h", "nemotron_h_moe", "qwen3next",
    "kimi-linear", "bailingmoe3", "kimi-k3", "glm5-next", "qwen35", "qwen35moe", "qwen4exp", "deepseek4", "minimax-01",
})
ATTENTION, ROLLBACK, CHECKPOINT = "attention", "rollback", "checkpoint"  # how a model goes back
COSTS = {
    ATTENTION: "a rejected draft costs nothing to undo",
    ROLLBACK: f"llama.cpp rolls its state back (n_rs_seq): the state kept {ROLLBACK_DEPTH + 1} times over in memory",
    CHECKPOINT: "a rejected draft costs one more decode of the accepted tokens (a checkpoint)",
}
# What Settings says: which architectures speculate, and at what cost (the measured figures: docs/recurrent.md).
SPECULATION_NOTE = (
    "Recurrent and hybrid models speculate in every mode. Qwen3.5, Nemotron-H and LFM2 roll their state back "
    "(more memory, no extra decode); Mamba, Granite 4.0-H, Jamba, Falcon-H1 and RWKV go back to a checkpoint and "
    "decode the accepted tokens again after a rejected draft, so auto may find ar faster. docs/recurrent.md.")


@dataclass(frozen=True, slots=True)
class ArchInfo:
    """A model's architecture as its header names it, and how its state goes back (:data:`COSTS`)."""

    arch: str
    undo: str

    @property
    def kind(self) -> str:
        """``recurrent``, ``hybrid`` or ``attention``."""
        return "recurrent" if self.arch in RECURRENT_ARCHS else "hybrid" if self.arch in HYBRID_ARCHS else ATTENTION

    @property
    def label(self) -> str:
        """``lfm2 (hybrid)``, ``llama`` or ``?`` (unread)."""
        if not self.arch:
            return "?"
        return self.arch if self.kind == ATTENTION else f"{self.arch} ({self.kind})"

    @property
    def cost(self) -> str:
        """What speculation costs on it, in one phrase."""
        return COSTS[self.undo]


def arch_info(arch: str) -> ArchInfo:
    """The :class:`ArchInfo` of an architecture name (``general.architecture``)."""
    if arch in ROLLBACK_ARCHS:
        return ArchInfo(arch, ROLLBACK)
    return ArchInfo(arch, CHECKPOINT if arch in RECURRENT_ARCHS | HYBRID_ARCHS else ATTENTION)


def from_metadata(meta: dict[str, object]) -> ArchInfo:
    """From a header's keys (as :func:`gguf_remote.read_metadata` gives them)."""
    raw = meta.get("general.architecture")
    return arch_info(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else "")


def of_file(path: Path) -> ArchInfo:
    """A GGUF file's architecture (``?`` when its header cannot be read)."""
    try:
        return from_metadata(gguf_remote.read_metadata(gguf_remote.file_fetch(path), {"general.architecture"}))
    except (gguf_remote.HeaderUnavailable, OSError):
        return arch_info("")


def pair_note(target: ArchInfo, draft: ArchInfo) -> str:
    """What a target/draft pair's architectures mean for speculation ("" when both are attention-only)."""
    if target.kind == ATTENTION and draft.kind == ATTENTION:
        return ""
    parts = [f"target {target.label}: {target.cost}"] if target.kind != ATTENTION else []
    if draft.kind != ATTENTION:
        parts.append(f"draft {draft.label}: ssd's tree branches only after its whole draft")
    return "; ".join(parts)
