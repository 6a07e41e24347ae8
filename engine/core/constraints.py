"""What a reply's constraints make of a logits row: logit bias, presence and frequency penalties, a grammar.

A :class:`Constraint` is the state of one path of tokens through a reply (the tokens it has accepted so far: their
counts for the penalties, the grammar's parse state). Given the raw row that predicts the next position it gives
the constrained argmax, best ids and truncated distribution:

1. the row is adjusted: ``logit + bias[id] - frequency * count[id] - presence * (count[id] > 0)`` (OpenAI's
   definition; counts over the reply's tokens, not the prompt's);
2. the grammar keeps the ids it allows: the adjusted order's first ``count`` allowed ids (best first, ties to the
   lowest id), found among a widening head of the order before the whole vocabulary is asked;
3. temperature, top-p and min-p run on those ids as :func:`~engine.core.sampling.truncate` runs them, top-k being
   the count asked for.

Each step is a function of the row and the path alone, so plain decoding and every speculative mode, which read
the same rows after the same committed tokens, get the same tokens and distributions: verification stays exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.errors import ParameterError

from .grammar import Grammar, GrammarError
from .ranks import FloatRow, IdRow, top_ids
from .sampling import Dist, SamplingParams, dist_top, to_dist, truncate

BIAS_LIMIT = 100.0  # OpenAI's bound on a logit bias; -100 bans a token, +100 forces it
PENALTY_LIMIT = 2.0  # OpenAI's bound on presence_penalty and frequency_penalty
_HEAD = 32  # ids of the adjusted order asked of the grammar first; each retry asks for eight times as many
_WIDEN = 8


def check_bias(bias: Mapping[int, float], n_vocab: int) -> None:
    """A clear error for a token id outside the vocabulary or a bias outside OpenAI's bounds."""
    for tok, value in bias.items():
        if not 0 <= tok < n_vocab:
            raise ParameterError(f"logit_bias: token id {tok} is not in the vocabulary (0 to {n_vocab - 1})")
        if not -BIAS_LIMIT <= value <= BIAS_LIMIT:
            raise ParameterError(f"logit_bias: the bias of token {tok} must be between -100 and 100, got {value}")


class Constraint:
    """Bias, penalties and grammar along one path of tokens; :meth:`clone` for a branch, :meth:`accept` to move."""

    def __init__(self, n_vocab: int, bias: Mapping[int, float], presence: float, frequency: float,
                 grammar: Grammar | None) -> None:
        check_bias(bias, n_vocab)
        for name, value in (("presence_penalty", presence), ("frequency_penalty", frequency)):
            if not -PENALTY_LIMIT <= value <= PENALTY_LIMIT:
                raise ParameterError(f"{name} must be between -2 and 2, got {value}")
        self.n_vocab = n_vocab
        self.bias = dict(bias)
        self._bias_ids = np.fromiter(self.bias, dtype=np.int64, count=len(self.bias))
        self._bias_vals = np.fromiter(self.bias.values(), dtype=np.float32, count=len(self.bias))
        self.presence = presence
        self.frequency = frequency
        self.grammar = grammar
        self.counts: dict[int, int] = {}

    @classmethod
    def build(cls, params: SamplingParams, model_ptr: Any, n_vocab: int) -> Constraint | None:
        """The constraint ``params`` ask for on this model (None when they ask for none)."""
        bias = dict(getattr(params, "logit_bias", ()))
        presence = float(getattr(params, "presence_penalty", 0.0))
        frequency = float(getattr(params, "frequency_penalty", 0.0))
        gbnf = str(getattr(params, "grammar", ""))
        if not bias and not gbnf and presence == 0.0 and frequency == 0.0:
            return None
        triggers = tuple(getattr(params, "grammar_triggers", ()))
        grammar = Grammar.for_model(model_ptr, gbnf, triggers) if gbnf else None
        return cls(n_vocab, bias, presence, frequency, grammar)

    def clone(self) -> Constraint:
        twin = Constraint.__new__(Constraint)
        twin.__dict__.update(self.__dict__)  # the bias arrays are shared, read-only
        twin.counts = dict(self.counts)
        twin.grammar = self.grammar.clone() if self.grammar is not None else None
        return twin

    def accept(self, token: int) -> None:
        """Move past ``token`` (raises :class:`GrammarError` for a token the grammar does not allow)."""
        if self.grammar is not None:
            self.grammar.accept(token)
        self.counts[token] = self.counts.get(token, 0) + 1

    def close(self) -> None:
        if self.grammar is not None:
            self.grammar.close()

    # -- rows ---------------------------------------------------------------------------------------
    def adjusted(self, row: FloatRow) -> FloatRow:
        """``row`` with bias and penalties added (a copy; the row itself when there are none)."""
        penalised = self.counts and (self.presence != 0.0 or self.frequency != 0.0)
        if not len(self._bias_ids) and not penalised:
            return row
        out = row.copy()
        if len(self._bias_ids):
            out[self._bias_ids] += self._bias_vals
        if penalised:
            ids = np.fromiter(self.counts, dtype=np.int64, count=len(self.counts))
            seen = np.fromiter(self.counts.values(), dtype=np.float32, count=len(self.counts))
            out[ids] -= np.float32(self.frequency) * seen + np.float32(self.presence)
        return out

    def ranked(self, row: FloatRow, count: int) -> tuple[IdRow, FloatRow]:
        """The first ``count`` allowed ids of the adjusted row's order (0: all of them), best first, and their
        adjusted logits."""
        eff = self.adjusted(row)
        n = len(eff)
        if self.grammar is None:
            ids = top_ids(eff, count if 0 < count < n else n)
            return ids, eff[ids]
        m = max(_HEAD, 2 * count)
        while count and m < n:
            ids = top_ids(eff, m)
            ok = ids[self.grammar.allowed(ids)]
            if len(ok) >= count:
                return ok[:count], eff[ok[:count]]
            m *= _WIDEN
        ids = np.flatnonzero(self.grammar.allowed(np.arange(n, dtype=np.int64)))
        if not len(ids):
            raise GrammarError("no token of the vocabulary can continue the grammar here")
        vals = eff[ids]
        order = np.lexsort((ids, -vals))  # best first, ties to the lowest id: top_ids' order
        ids = ids[order][: count or None]
        return ids, eff[ids]

    def argmax(self, row: FloatRow) -> int:
        if self.grammar is None:
            return int(self.adjusted(row).argmax())  # the first maximum: the lowest id, as in plain decoding
        return int(self.ranked(row, 1)[0][0])

    def top(self, row: FloatRow, count: int) -> IdRow:
        return self.ranked(row, count)[0]

    def dist(self, row: FloatRow, params: SamplingParams) -> Dist:
        """The truncated distribution over the allowed ids (no grammar: :func:`to_dist` of the adjusted row)."""
        if self.grammar is None:
            return to_dist(self.adjusted(row), params)
        k = params.top_k if 0 < params.top_k < len(row) else 0
        ids, vals = self.ranked(row, k)
        return truncate(ids, vals.astype(np.float64) / params.temperature, params)

    def dist_top(self, row: FloatRow, params: SamplingParams, count: int) -> tuple[Dist, IdRow]:
        """:meth:`dist` and :meth:`top` from one adjusted row and one ranking (the best ``count`` ids of the
        ranking :meth:`dist` truncates are :meth:`top`'s)."""
        if self.grammar is None:
            return dist_top(self.adjusted(row), params, count)  # sampling's: one selection for both
        k = params.top_k if 0 < params.top_k < len(row) else 0
        ids, vals = self.ranked(row, max(k, count) if k else 0)
        kept = slice(k or None)
        return truncate(ids[kept], vals[kept].astype(np.float64) / params.temperature, params), ids[:count]
