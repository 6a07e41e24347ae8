"""Two local GGUF files held to llama.cpp's pairing rule, a target checked alone, and a model refused as its own
draft."""

from __future__ import annotations

from pathlib import Path

from engine.core.backend import Model
from engine.core.gguffile import check_gguf_file
from engine.core.vocab import check_compatible
from engine.errors import EngineError, VocabMismatchError


def explain_mismatch(target: Path, draft: Path, exc: VocabMismatchError) -> VocabMismatchError:
    """Reword a rule failure for users: which file cannot draft for which, why, and what to do."""
    return VocabMismatchError(
        f"{draft.name} cannot be the draft for {target.name}: {exc}. Speculative decoding needs both "
        "models to share one tokenizer; pick a draft from the target's model family"
    )


def check_pair_files(target: Path, draft: Path) -> None:
    """Apply llama.cpp's pairing rule to two local GGUF files (vocabularies only, fast).

    Raises:
        ModelLoadError: A file is missing, not GGUF, or llama.cpp refuses it.
        VocabMismatchError: The draft's vocabulary does not match the target's (reason in plain words).
    """
    check_gguf_file(target)
    check_gguf_file(draft)
    with Model(target, vocab_only=True) as t, Model(draft, vocab_only=True) as d:
        try:
            check_compatible(t, d)
        except VocabMismatchError as exc:
            raise explain_mismatch(target, draft, exc) from exc


def check_model_file(target: Path) -> None:
    """A target imported alone: a GGUF file whose vocabulary llama.cpp loads.

    Raises:
        ModelLoadError: The file is missing, not GGUF, or llama.cpp refuses it.
    """
    check_gguf_file(target)
    with Model(target, vocab_only=True):
        pass


def own_draft(target: Path) -> EngineError:
    """Why a file cannot be its own draft: drafting would cost as much as the target's own decoding."""
    return EngineError(f"{target.name} cannot be its own draft: a draft is a smaller model of the same family (the "
                       "target drafting for itself costs as much as it saves); import it without a draft to run it "
                       "with the lookup and ar modes")
