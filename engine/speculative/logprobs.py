"""Log-probabilities of a reply's tokens, read from the target's rows that every round's verdict already has.

Every mode emits its tokens through :meth:`~engine.speculative.target.Target._verdict` (the prompt's first token,
ar's rounds and every verified draft): row i of that verdict's outputs predicts its i-th emitted token. A
:class:`RowTap` wraps that one method on the engine's targets for the length of a generation and keeps, per
emitted token, its log-probability under the target's own distribution (the log-softmax of the raw logits row: before
temperature, truncation, bias or grammar) and the ``top`` likeliest ids with theirs. While tapped, the target
reads host rows (a backend sampler chain returns candidates only, not the whole row); the reply does not change,
since both paths sample the same distributions.

:func:`generate` is the same for an engine in a process of its own: a task (``module:function``) the process
runs beside nothing else, reporting each token with its figures.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engine.core.outputs import HOST
from engine.core.sampling import FloatRow

from .types import Draft, Verdict

MAX_TOP = 20  # OpenAI's top_logprobs range (0-20)
FLOOR = -9999.0  # the log-probability reported for a token of probability 0 (OpenAI's value for it)
TASK = "engine.speculative.logprobs:generate"

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
    """Figures of every token the ``targets`` emit while installed (:meth:`install` ... :meth:`remove`); a reply
    runs on one of them (an engine's sequences each have a target), whichever it was given."""

    def __init__(self, targets: Sequence[Any], top: int) -> None:
        self.targets = list(targets)
        self.top = min(max(top, 0), MAX_TOP)
        self.found: list[deque[Figures]] = [deque() for _ in self.targets]
        self._which: int | None = None  # the target the reply runs on, known from its first figures
        self._installed = False

    def install(self) -> None:
        if self._installed:
            return
        for target, found in zip(self.targets, self.found, strict=True):
            target._verdict = self._tapped(target._verdict, found)
        for ctx in {id(t.ctx): t.ctx for t in self.targets}.values():
            ctx.sampling_path = lambda params: HOST
        self._installed = True

    def _tapped(self, verdict: Callable[[Draft, Any], Verdict], found: deque[Figures]) -> Any:
        def tapped(draft: Draft, rows: Any) -> Verdict:
            out = verdict(draft, rows)
            for i, tok in enumerate(out.tokens(draft.tokens)):  # nothing decodes in between: the rows are live
                found.append(row_figures(rows.row(i), tok, self.top))
            return out

        return tapped

    def remove(self) -> None:
        """Give the targets their own methods back (idempotent)."""
        if self._installed:
            for target in self.targets:
                del target._verdict
            for ctx in {id(t.ctx): t.ctx for t in self.targets}.values():
                del ctx.sampling_path
            self._installed = False

    def take(self, token: int) -> Figures | None:
        """The figures of the next emitted token, which must be ``token`` (None if the rows said otherwise)."""
        if self._which is None:
            self._which = next((i for i, f in enumerate(self.found) if f), None)
            if self._which is None:
                return None
        found = self.found[self._which]
        while found:
            got = found.popleft()
            if got[0] == token:
                return got
        return None


def targets_of(engine: Any) -> list[Any]:
    """The targets a reply of ``engine`` may run on: one per sequence of its target context."""
    slots = getattr(engine, "_slots", None)
    return list(getattr(slots, "targets", None) or [engine.target])


class TappedGeneration:
    """An engine's generation whose events each come with their figures, appended to ``sink`` as they are yielded."""

    def __init__(self, engine: Any, prompt: Sequence[int], params: Any, stop: threading.Event | None, top: int,
                 sink: list[Figures | None]) -> None:
        self._tap = RowTap(targets_of(engine), top)
        self._tap.install()
        try:
            self._gen = engine.generate(prompt, params, stop)
        except BaseException:
            self._tap.remove()
            raise
        self._sink = sink

    def __iter__(self) -> Any:
        try:
            for ev in self._gen:
                self._sink.append(self._tap.take(ev.token))
                yield ev
        finally:
            self.close()

    @property
    def stats(self) -> Any:
        return self._gen.stats

    @property
    def tokens(self) -> list[int]:
        return list(self._gen.tokens)

    def close(self) -> None:
        self._gen.close()  # the engine has let go of the target: its methods can be given back
        self._tap.remove()


def generate(engine: Any, prompt: Sequence[int], params: Any, top: int, stop: threading.Event,
             report: Callable[[object], None]) -> Any:
    """The task: generate with the tap on, report ``(token, text, from_draft, round, figures)`` per token, and
    return the generation's statistics."""
    sink: list[Figures | None] = []
    gen = TappedGeneration(engine, list(prompt), params, stop, top, sink)
    for n, ev in enumerate(gen):
        report((ev.token, ev.text, ev.from_draft, ev.round, sink[n]))
    return gen.stats
