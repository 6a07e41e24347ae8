"""Log-probabilities of a reply's tokens, read from the target's rows that every round's verdict already has.

Every mode emits its tokens through a verdict of its target (the prompt's first token, ar's rounds and every
verified draft), and row i of a verdict's rows predicts its i-th emitted token. A :class:`RowTap` is the row
observer (:data:`~engine.speculative.target.RowObserver`) of one reply's own target, so replies running at once on
one context each read their own rows. It keeps, per emitted token, its log-probability under the target's own
distribution (the log-softmax of the raw logits row: before temperature, truncation, bias or grammar) and the
``top`` likeliest ids with theirs.

:func:`generate` is the same for an engine in a process of its own, reporting each token with its figures (the
server's task, :mod:`engine.server.logprob_task`, runs it there).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engine.core.ranks import FloatRow

from .constrained import RawRows
from .target import observing
from .types import Draft, Verdict

MAX_TOP = 20  # OpenAI's top_logprobs range (0-20)
FLOOR = -9999.0  # the log-probability reported for a token of probability 0 (OpenAI's value for it)

Figures = tuple[int, float, tuple[tuple[int, float], ...]]  # (token, logprob, ((id, logprob), ...) best first)


def row_figures(row: FloatRow, token: int, top: int) -> Figures:
    """``token``'s log-probability under the softmax of ``row``, and the ``top`` best ids (ties to the lower id)."""
    x = np.asarray(row, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.where(np.isfinite(x), x, -np.inf)
        m = float(finite.max()) if finite.size else 0.0
        lse = m + float(np.log(np.exp(finite - m).sum())) if np.isfinite(m) else 0.0

    def lp(i: int) -> float:
        v = float(finite[i]) - lse
        return v if np.isfinite(v) else FLOOR

    best: tuple[tuple[int, float], ...] = ()
    if top > 0:
        n = min(top, x.size)
        cut = np.argpartition(-finite, n - 1)[:n]
        order = cut[np.lexsort((cut, -finite[cut]))]
        best = tuple((int(i), lp(int(i))) for i in order)
    return int(token), lp(int(token)), best


class RowTap:
    """The figures of every token one reply's target emits, as its row observer (:meth:`observe`)."""

    def __init__(self, top: int) -> None:
        self.top = min(max(top, 0), MAX_TOP)
        self.found: deque[Figures] = deque()  # appended on the decoding thread, taken on the reply's

    def observe(self, draft: Draft, rows: RawRows, verdict: Verdict) -> None:
        for i, tok in enumerate(verdict.tokens(draft.tokens)):  # nothing decodes in between: the rows are live
            self.found.append(row_figures(rows.row(i), tok, self.top))

    def take(self, token: int) -> Figures | None:
        """The figures of the next emitted token, which must be ``token`` (None if the rows said otherwise)."""
        while self.found:
            got = self.found.popleft()
            if got[0] == token:
                return got
        return None


class TappedGeneration:
    """An engine's generation whose events each come with their figures, appended to ``sink`` as they are yielded."""

    def __init__(self, engine: Any, prompt: Sequence[int], params: Any, stop: threading.Event | None, top: int,
                 sink: list[Figures | None]) -> None:
        self._tap = RowTap(top)
        self._gen = engine.generate(prompt, params, stop)
        self._sink = sink

    def __iter__(self) -> Any:
        events = iter(self._gen)
        try:
            with observing(self._tap.observe):  # the reply's target is chosen and prepared in its first step
                ev = next(events, None)
            while ev is not None:
                self._sink.append(self._tap.take(ev.token))
                yield ev
                ev = next(events, None)
        finally:
            self.close()

    @property
    def stats(self) -> Any:
        return self._gen.stats

    @property
    def tokens(self) -> list[int]:
        return list(self._gen.tokens)

    def close(self) -> None:
        self._gen.close()


def generate(engine: Any, prompt: Sequence[int], params: Any, top: int, stop: threading.Event,
             report: Callable[[object], None]) -> Any:
    """The task: generate with the tap on, report ``(token, text, from_draft, round, figures)`` per token, and
    return the generation's statistics."""
    sink: list[Figures | None] = []
    gen = TappedGeneration(engine, list(prompt), params, stop, top, sink)
    for n, ev in enumerate(gen):
        report((ev.token, ev.text, ev.from_draft, ev.round, sink[n]))
    return gen.stats
