"""The logprobs task in the engine process: the tapped generation (:mod:`engine.speculative.logprobs`), each
token reported with the bytes of the tokens its figures name (its own and its top alternatives), so the server
writes their texts with no copy of the target's vocabulary of its own."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from engine.speculative import logprobs
from engine.speculative.logprobs import Figures

TASK = f"{__name__}:generate"


def pieces(model: Any, figures: Figures | None) -> dict[int, bytes]:
    """The bytes of each token ``figures`` names, special tokens as their text."""
    if figures is None:
        return {}
    token, _, best = figures
    return {t: model.token_bytes(t, special=True) for t in (token, *(t for t, _ in best))}


def generate(engine: Any, prompt: Sequence[int], params: Any, top: int, stop: threading.Event,
             report: Callable[[object], None]) -> Any:
    """The task: report ``(token, text, from_draft, round, figures, pieces)`` per token; return the statistics."""
    model = engine.target_model

    def with_pieces(value: Any) -> None:
        report((*value, pieces(model, value[4])))

    return logprobs.generate(engine, prompt, params, top, stop, with_pieces)
