"""The target model's side of every round: prefill, then one batched forward pass per round that accepts drafts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import cast

import numpy as np

from engine.core.backend import Model
from engine.core.constraints import Constraint
from engine.core.context import Context
from engine.core.gumbel import COUPLED
from engine.core.kvtrack import KVTrack
from engine.core.outputs import BACKEND, HOST, chain_spec
from engine.core.sampling import SamplingParams
from engine.errors import ContextFullError, ParameterError, PrefillStopped
from engine.remote import LINK_TOP

from .constrained import ConstrainedRows, RawRows
from .types import Draft, Verdict
from .verify import TargetRows, verify_coupled, verify_greedy, verify_sampled

# Called with every verdict of the reply it observes: the draft, the target's raw rows for it (live until the
# context decodes again) and the verdict (row i predicts the verdict's i-th token).
RowObserver = Callable[[Draft, RawRows, Verdict], None]
_preparing = threading.local()  # the observer a reply prepared on this thread takes (:func:`observing`)


@contextmanager
def observing(observer: RowObserver) -> Iterator[None]:
    """Every reply a target prepares on this thread within the block is observed by ``observer``: a reply's
    target is chosen when it starts, and its prompt is prepared on the thread that starts it."""
    before = getattr(_preparing, "observer", None)
    _preparing.observer = observer
    try:
        yield
    finally:
        _preparing.observer = before


class Target:
    """The target side (a :class:`~engine.speculative.types.Verifier`): committed tokens, prefill with prefix
    reuse, and verification of a draft in one batch.

    Each generation picks its sampling path (:attr:`path`): ``backend`` attaches llama.cpp's sampler
    chain to the context (greedy: token ids only; sampled: the truncated candidates), ``host`` reads the
    logits rows in place.
    """

    def __init__(self, model: Model, ctx: Context, seq: int = 0, grid: int = 0) -> None:
        """``seq``: the context's sequence it holds; ``grid``: the prompt chunk (:class:`KVTrack`)."""
        self.model = model
        self.ctx = ctx
        self.seq = seq
        self.kv = KVTrack(ctx, seq, grid)
        self.committed: list[int] = []
        self.params = SamplingParams()
        self.rng = np.random.default_rng(0)
        self.path = HOST
        self.constraint: Constraint | None = None  # the reply's bias, penalties and grammar, after ``committed``
        self.observer: RowObserver | None = None  # the reply's row observer (:func:`observing`), if it has one

    @property
    def new_shape(self) -> bool:
        """The latest verify built its graph over RPC (round trips); a local build costs next to nothing."""
        return self.ctx.new_shape and bool(self.model.remote)

    def set_threads(self, n: int) -> None:
        self.ctx.set_threads(n, n)

    def start(self, prompt: Sequence[int], params: SamplingParams, rng: np.random.Generator,
              stops: Sequence[threading.Event] = ()) -> int | None:
        """Prefill ``prompt`` (reusing the cached prefix) and sample the first token; None when one of ``stops`` is
        set between the prompt's chunks (a client that has left holds the engine for a chunk, not the prompt)."""
        self.prepare(prompt, params, rng)
        try:
            out = self.kv.sync_out(self.committed, lambda: any(e.is_set() for e in stops))
        except PrefillStopped:
            return None
        return self.first(out)

    def prepare(self, prompt: Sequence[int], params: SamplingParams, rng: np.random.Generator) -> None:
        """A reply's sampling, constraint and prompt, before the prompt is read."""
        if not prompt:
            raise ParameterError("the prompt is empty")
        self.params = params
        self.rng = rng
        self.observer = getattr(_preparing, "observer", None)
        # an observer reads whole rows: a backend chain returns candidates only (both sample the same distributions)
        self.path = HOST if self.observer is not None else self.ctx.sampling_path(params)
        # a remote target's greedy rows come back as its best few ids: a greedy chain also returns the whole row
        top = LINK_TOP if self.model.remote else 0
        self.ctx.set_sampling(chain_spec(params, self.ctx.n_vocab, top_count=top) if self.path == BACKEND else None)
        if self.constraint is not None:
            self.constraint.close()
        self.constraint = Constraint.build(params, self.model.ptr, self.ctx.n_vocab)
        self.committed = list(prompt)

    def first(self, out: TargetRows) -> int:
        """The first token, from the prompt's last row (the prompt read whole)."""
        self.kv.keep_prompt()  # where a later request that shares this prompt starts again (a recurrent state)
        verdict = self._verdict(Draft([], None), out)
        self.committed.append(verdict.next_token)
        return verdict.next_token

    def verify(self, draft: Draft) -> Verdict:
        """Run [r, d_1..d_K] through the target in one batch, accept, trim the KV, commit."""
        batch, p_r = self.rows(draft)
        before = self.kv.checkpoint_s
        self.kv.before_cut(len(draft.tokens))
        out = self.ctx.decode_out(batch, range(p_r, p_r + len(batch)), self.seq, range(len(batch)))
        return self.accept(draft, out, before)

    def rows(self, draft: Draft) -> tuple[list[int], int]:
        """The tokens a verify of ``draft`` decodes and the position of the first (the KV cut back to it)."""
        p_r = len(self.committed) - 1
        self.kv.trim(p_r)
        if len(self.kv.tokens) != p_r:
            self.kv.sync_out(self.committed[:-1] or self.committed)
            self.kv.trim(p_r)
        batch = [self.committed[-1], *draft.tokens]
        if p_r + len(batch) > self.ctx.n_ctx_seq:
            raise ContextFullError(f"the context of {self.ctx.n_ctx_seq} tokens is full")
        return batch, p_r

    def accept(self, draft: Draft, out: TargetRows, before: float | None = None) -> Verdict:
        """Judge the decoded rows of :meth:`rows` (``before``: the checkpoint time before they were decoded)."""
        before = self.kv.checkpoint_s if before is None else before
        p_r = len(self.committed) - 1
        self.kv.tokens.extend([self.committed[-1], *draft.tokens])
        verdict = self._verdict(draft, out)
        keep = p_r + 1 + verdict.accepted
        self.kv.trim(keep)
        self.committed.extend(verdict.tokens(draft.tokens))
        redo = 0.0
        if len(self.kv.tokens) < keep:  # back at a checkpoint: the accepted tokens again, in this round's time
            t0 = time.perf_counter()
            self.kv.sync_out(self.committed[:keep])
            redo = time.perf_counter() - t0
        restore_s = self.kv.checkpoint_s - before + redo
        return replace(verdict, restore_s=restore_s) if restore_s else verdict

    def _verdict(self, draft: Draft, rows: TargetRows) -> Verdict:
        if self.constraint is None:
            verdict = self._verify(draft, rows)
        else:
            constrained = ConstrainedRows(rows, draft.tokens, self.constraint)  # type: ignore[arg-type]
            verdict = self._verify(draft, constrained)
            constrained.finish(verdict.tokens(draft.tokens))
        if self.observer is not None:  # an observed reply reads host rows (prepare), which have their raw logits
            self.observer(draft, cast(RawRows, rows), verdict)
        return verdict

    def _verify(self, draft: Draft, rows: TargetRows) -> Verdict:
        if self.params.greedy:
            return verify_greedy(draft.tokens, rows, self.model.is_eog)
        if self.params.scheme == COUPLED:  # row 0 samples the position after the committed tokens
            return verify_coupled(draft.tokens, rows, self.params, len(self.committed), self.model.is_eog)
        assert draft.q is not None or not draft.tokens
        return verify_sampled(draft.tokens, draft.q or [], rows, self.params, self.rng, self.model.is_eog)
