"""Fill-in-the-middle prompts: the code before and after the cursor, in the model's own FIM tokens.

llama.cpp finds a vocabulary's FIM tokens (GGUF metadata, else the known texts such as Qwen2.5-Coder's
``<|fim_prefix|>``, ``<|fim_suffix|>``, ``<|fim_middle|>``). The prompt is prefix-suffix-middle, as those models
were trained: ``[BOS] <PRE> prefix <SUF> suffix <MID>``; the model then writes the middle and ends with an
end-of-generation token. The code itself is tokenized as text, so it can never form a FIM or control token. The
middle also ends at a FIM token (:func:`fim_ends`) and where it starts writing the suffix (:func:`suffix_head`).
"""

from __future__ import annotations

import llama_cpp as ll

from engine.errors import ParameterError

from .backend import Model


def fim_ids(model: Model) -> tuple[int, int, int] | None:
    """The (prefix, suffix, middle) token ids, or None when the vocabulary lacks one of them."""
    vocab = ll.llama_model_get_vocab(model.ptr)
    ids = (int(ll.llama_vocab_fim_pre(vocab)), int(ll.llama_vocab_fim_suf(vocab)), int(ll.llama_vocab_fim_mid(vocab)))
    return None if min(ids) < 0 else ids


def fim_tokens(model: Model, prefix: str, suffix: str) -> list[int]:
    """The FIM prompt for the code between ``prefix`` and ``suffix``.

    Raises:
        ParameterError: The model has no fill-in-the-middle tokens.
    """
    ids = fim_ids(model)
    if ids is None:
        raise ParameterError("suffix: this model has no fill-in-the-middle tokens (a coder model such as "
                             "Qwen2.5-Coder has them)")
    pre, suf, mid = ids
    vocab = ll.llama_model_get_vocab(model.ptr)
    head = [model.bos] if ll.llama_vocab_get_add_bos(vocab) and model.bos >= 0 else []
    text = model.tokenize
    return [*head, pre, *text(prefix, add_special=False), suf, *text(suffix, add_special=False), mid]


# The suffix's head, written by the middle, ends it: enough characters that the middle's own code rarely holds them
REPEAT_CHARS = 12
MIN_REPEAT_CHARS = 3  # a suffix with fewer ("}", ")") is code the middle may well write itself: no head


def fim_ends(model: Model) -> frozenset[int]:
    """The tokens that end a middle: the vocabulary's FIM tokens (a new prefix, suffix or middle marker, and the pad,
    repository and file separators llama.cpp finds by name), beside the end-of-generation tokens that end any
    reply (``<|endoftext|>``...)."""
    vocab = ll.llama_model_get_vocab(model.ptr)
    found = (ll.llama_vocab_fim_pre, ll.llama_vocab_fim_suf, ll.llama_vocab_fim_mid, ll.llama_vocab_fim_pad,
             ll.llama_vocab_fim_rep, ll.llama_vocab_fim_sep)
    return frozenset(t for t in (int(f(vocab)) for f in found) if t >= 0)


def suffix_head(suffix: str) -> str | None:
    """The start of ``suffix`` that a middle writing it has ended at: its whole lines (their line breaks between,
    not after) until they hold :data:`REPEAT_CHARS` characters other than whitespace, or all of it; None when it
    has fewer than :data:`MIN_REPEAT_CHARS`."""
    lines = suffix.split("\n")
    for n in range(1, len(lines) + 1):
        head = "\n".join(lines[:n])
        if len("".join(head.split())) >= REPEAT_CHARS:
            return head
    return suffix.rstrip() if len("".join(suffix.split())) >= MIN_REPEAT_CHARS else None
