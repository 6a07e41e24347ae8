"""Marker texts as tokens of one vocabulary: a family's markers that the vocabulary holds as single tokens."""

from __future__ import annotations

from collections.abc import Iterable

from engine.core.backend import Model


def single_tokens(model: Model, texts: Iterable[str]) -> frozenset[int]:
    """The ids of those ``texts`` that are one token each of ``model``'s vocabulary."""
    out = set()
    for text in texts:
        toks = model.tokenize(text, add_special=False, parse_special=True) if text else []
        if len(toks) == 1:
            out.add(toks[0])
    return frozenset(out)
