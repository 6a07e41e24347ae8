"""llama.cpp's rule for pairing a draft with a target (``common_speculative_are_compatible``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.errors import VocabMismatchError

from .backend import Model

MAX_SIZE_DIFFERENCE = 128
CHECK_START_ID = 5
_TYPES = {
    0: "none", 1: "SentencePiece (SPM)", 2: "byte-level BPE", 3: "WordPiece", 4: "Unigram", 5: "RWKV",
    6: "PLaMo-2",
}


@dataclass(frozen=True)
class VocabInfo:
    """What the pairing rule looks at, from a loaded model or from a GGUF header read over HTTP.

    Attributes:
        vocab_type: llama.cpp's ``llama_vocab_type`` (1 = SPM, 2 = BPE, ...).
        n_vocab: Number of tokens.
        bos: BOS token id.
        eos: EOS token id.
        add_bos: Whether tokenization prepends BOS.
        add_eos: Whether tokenization appends EOS.
        token_text: The stored text of a token id, as bytes.
    """

    vocab_type: int
    n_vocab: int
    bos: int
    eos: int
    add_bos: bool
    add_eos: bool
    token_text: Callable[[int], bytes]


def vocab_info(model: Model) -> VocabInfo:
    """The :class:`VocabInfo` of a loaded model (``vocab_only=True`` is enough)."""
    return VocabInfo(
        model.vocab_type, model.n_vocab, model.bos, model.eos, model.add_bos, model.add_eos, model.token_text
    )


def check_vocab_rule(target: VocabInfo, draft: VocabInfo) -> None:
    """Raise :class:`VocabMismatchError` naming the first check of llama.cpp's rule that fails."""
    if target.vocab_type != draft.vocab_type:
        t_type = _TYPES.get(target.vocab_type, target.vocab_type)
        d_type = _TYPES.get(draft.vocab_type, draft.vocab_type)
        raise VocabMismatchError(f"vocabulary type differs: target uses {t_type}, draft uses {d_type}")
    if target.add_bos != draft.add_bos or (target.add_bos and target.bos != draft.bos):
        raise VocabMismatchError(
            f"BOS token differs: target add_bos={target.add_bos} id={target.bos}, "
            f"draft add_bos={draft.add_bos} id={draft.bos}"
        )
    if target.add_eos != draft.add_eos or (target.add_eos and target.eos != draft.eos):
        raise VocabMismatchError(
            f"EOS token differs: target add_eos={target.add_eos} id={target.eos}, "
            f"draft add_eos={draft.add_eos} id={draft.eos}"
        )
    diff = abs(target.n_vocab - draft.n_vocab)
    if diff > MAX_SIZE_DIFFERENCE:
        raise VocabMismatchError(
            f"vocabulary sizes differ by {diff} (target {target.n_vocab}, draft {draft.n_vocab}; at most "
            f"{MAX_SIZE_DIFFERENCE} allowed)"
        )
    for t in range(CHECK_START_ID, min(target.n_vocab, draft.n_vocab)):
        a, b = target.token_text(t), draft.token_text(t)
        if a != b:
            raise VocabMismatchError(
                f"token {t} differs: target has {a.decode('utf-8', 'replace')!r}, draft has "
                f"{b.decode('utf-8', 'replace')!r}"
            )


def check_compatible(target: Model, draft: Model) -> None:
    """Raise :class:`VocabMismatchError` naming the first check that fails."""
    check_vocab_rule(vocab_info(target), vocab_info(draft))
