"""The draft model's side: sequential (JIT) drafting, the n-gram backup, serving a round, the tree.

A :class:`Drafter` owns the draft context; sequence 0 holds the committed path and the
:class:`~engine.speculative.tree.SpeculationTree` the branches. One thread uses it at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from engine.core.constraints import Constraint
from engine.core.context import Context
from engine.core.gumbel import COUPLED, gumbel_order, gumbel_sample
from engine.core.kvtrack import KVTrack
from engine.core.outputs import BACKEND, HOST, Outputs, chain_spec
from engine.core.sampling import Dist, SamplingParams, sample
from engine.errors import PrefillStopped

from . import ngram
from .constrained import DraftConstraint
from .speccache import Branch
from .tree import SpeculationTree
from .types import CACHE, JIT, NGRAM, ROUND_SYNC, Draft, IdRow, TreeStats

log = logging.getLogger(__name__)


class Drafter:
    """Drafting on the draft context; used by one thread at a time."""

    def __init__(
        self,
        ctx: Context,
        is_eog: Callable[[int], bool],
        max_branches: int,
    ) -> None:
        self.ctx = ctx
        self.kv = KVTrack(ctx)
        self.is_eog = is_eog
        self.max_branches = max_branches
        self.tree = SpeculationTree(ctx, self.kv, is_eog, max_branches)
        self.params = SamplingParams()
        self.rng = np.random.default_rng(0)
        self.top_count = 4
        self.path = HOST  # where this generation samples (engine.core.outputs.choose_path)
        self._threads = ctx.params.n_threads
        self.pool_draft: Callable[[Sequence[int], int], Draft] | None = None  # the engine's n-gram pool, if set
        self._stops: tuple[threading.Event, ...] = ()
        self.mirror_constraints = True  # draft under the reply's constraints (off: to measure what they are worth)
        self.mirror: DraftConstraint | None = None  # the reply's constraints on this side, if it has any

    def stop_when(self, *events: threading.Event) -> None:
        """The events that end this generation: once one is set, drafting and tree building stop after the
        draft step in progress (a cut draft is still a valid draft, so the round it serves stays exact)."""
        self._stops = events

    def stopping(self) -> bool:
        """Whether the generation has been asked to stop."""
        return any(event.is_set() for event in self._stops)

    def configure(self, params: SamplingParams, rng: np.random.Generator, top_count: int, prompt_len: int = 0) -> None:
        """A new generation's sampler: its settings, random numbers, the best ids kept per row, and the reply's
        constraints (bias, penalties, grammar) over the tokens after the prompt's ``prompt_len``.

        On the backend path the draft context's chain returns the ``top_count`` best ids (greedy) or the
        truncated candidates (sampled), built as the target's are.
        """
        self.params = params
        self.rng = rng
        self.top_count = max(1, top_count)
        self.drop_tree()
        self.path = self.ctx.sampling_path(params)
        backend = self.path == BACKEND
        self.ctx.set_sampling(chain_spec(params, self.ctx.n_vocab, top_count=self.top_count) if backend else None)
        if self.mirror is not None:
            self.mirror.close()
        built = Constraint.build(params, self.ctx.model.ptr, self.ctx.n_vocab) if self.mirror_constraints else None
        self.mirror = DraftConstraint(built, prompt_len) if built is not None else None

    def set_threads(self, n: int) -> None:
        if n != self._threads:
            self.ctx.set_threads(n, n)
            self._threads = n

    def read(self, out: Outputs, r: int, position: int, state: Constraint | None = None) \
            -> tuple[int, Dist | None, IdRow]:
        """Output ``r``, which predicts absolute ``position``: the drafted token, the q it was drawn from (None when
        greedy), the best ids (coupled: by perturbed score under that position's noise, the drafted token first);
        ``state``: the constraints after the path this row follows."""
        if self.params.greedy:
            top = out.top(r, self.top_count) if state is None else state.top(out.row(r), self.top_count)
            return int(top[0]), None, top
        if state is None:
            q, top = out.dist_top(r, self.params, self.top_count)
        else:
            q, top = state.dist_top(out.row(r), self.params, self.top_count)
        if self.params.scheme == COUPLED:
            top = self._coupled_top(q, top, position)
            return int(top[0]), q, top
        return sample(q, self.rng), q, top

    def rank(self, out: Outputs, r: int, position: int) -> IdRow:
        """The best ids of output ``r`` for a tree's branches (coupled: as :meth:`read` orders them)."""
        if self.params.greedy or self.params.scheme != COUPLED:
            return out.top(r, self.top_count)
        return self.read(out, r, position)[2]

    def _coupled_top(self, q: Dist, top: IdRow, position: int) -> IdRow:
        """q's candidates by perturbed score; where truncation left fewer than the ids kept, the best of the
        rest follow in logit order (the target's truncation may keep them)."""
        order = gumbel_order(q, self.params.seed, position, self.top_count)
        if len(order) >= self.top_count:
            return order
        rest = top[~np.isin(top, order)][: self.top_count - len(order)]
        return np.concatenate((order, rest))

    def lag(self, committed: Sequence[int]) -> int:
        """Tokens of ``committed`` the draft's KV does not hold yet (it decodes them before it drafts)."""
        return self.kv.unseen(committed)

    # -- sequential (JIT) drafting, also plain SD's drafter ---------------------------------------
    def draft_sequential(self, committed: Sequence[int], k: int) -> Draft:
        """Draft ``k`` tokens one at a time after ``committed``; the KV ends at committed + d[:-1]."""
        t0 = time.perf_counter()
        out = self.kv.sync_out(committed)
        # A round's own sync decodes one or two tokens; more is catching up on tokens drafted by no one.
        catchup = self.kv.synced if self.kv.synced > ROUND_SYNC else 0
        catchup_s = time.perf_counter() - t0 if catchup else 0.0
        if catchup:
            self.kv.keep_prompt()
        self.kv.checkpoint()  # the drafts decoded next are cut back one by one (no-op without a recurrent state)
        tokens: list[int] = []
        qs: list[Dist] = []
        tops: list[IdRow] = []
        state = self.mirror.at(committed) if self.mirror is not None else None
        sd_only = self.top_count == 1 and state is None  # plain sd: no tree wants the best ids
        for i in range(k):
            if sd_only and self.params.greedy:
                tok = out.argmax(0)
            elif sd_only:
                qs.append(out.dist(0, self.params))
                tok = (gumbel_sample(qs[-1], self.params.seed, len(committed) + i)
                       if self.params.scheme == COUPLED else sample(qs[-1], self.rng))
            else:
                tok, q, top = self.read(out, 0, len(committed) + i, state)
                tops.append(top)
                if q is not None:
                    qs.append(q)
            if state is not None:
                state.accept(tok)  # drafted under the state: allowed
            tokens.append(tok)
            if self.is_eog(tok) or i == k - 1 or self.stopping():
                break
            out = self.kv.decode_one(tok)
        return Draft(tokens, None if self.params.greedy else qs, JIT, top=tops, serve_s=time.perf_counter() - t0,
                     catchup_s=catchup_s, catchup_tokens=catchup)

    def draft_ngram(self, committed: Sequence[int], k: int) -> Draft | None:
        """Prompt-lookup draft (q one-hot), or None when the context has no match (with the engine's
        n-gram pool: when the pool's draft would not beat a plain step)."""
        if self.pool_draft is not None:
            pooled = self.pool_draft(committed, k)
            return pooled if pooled.tokens else None
        toks = ngram.lookup(committed, num_pred=k)
        if not toks:
            return None
        q = None if self.params.greedy else [Dist.one_hot(t) for t in toks]
        return Draft(toks, q, NGRAM)

    # -- serving a round in SSD ----------------------------------------------------------------
    def serve(self, committed: Sequence[int], accepted: int, k: int, backup: str) -> Draft:
        """Answer a request: the cached branch on a hit, else the backup speculator."""
        t0 = time.perf_counter()
        branch = self.tree.find(committed, accepted)
        if branch is not None:
            self._promote(branch, committed)
            n = min(k, branch.depth)
            self.kv.trim(len(committed) + n - 1)
            return Draft(branch.tokens[:n], None if self.params.greedy else branch.q[:n], CACHE,
                         top=branch.top[:n], serve_s=time.perf_counter() - t0)
        self.drop_tree()
        if backup == NGRAM:
            d = self.draft_ngram(committed, k)
            if d is not None:
                d.serve_s = time.perf_counter() - t0
                return d
        d = self.draft_sequential(committed, k)
        d.serve_s = time.perf_counter() - t0
        return d

    def _promote(self, branch: Branch, committed: Sequence[int]) -> None:
        p = branch.pos0
        if self.ctx.kind.recurrent:  # the branch holds the whole path (a state cannot be cut at p)
            self.ctx.seq_rm(0, -1, -1)
            self.ctx.seq_cp(branch.seq_id, 0, -1, -1)
            self.kv.forget_after(p)
        else:
            self.ctx.seq_rm(0, p, -1)
            self.ctx.seq_cp(branch.seq_id, 0, p, -1)
        new_tail = [branch.token, *branch.tokens[: branch.depth - 1]]
        self.kv.tokens[p:] = new_tail
        self.drop_tree()
        assert self.kv.tokens[: len(committed)] == list(committed), "promoted branch diverges from committed"

    def reset(self) -> None:
        """Forget everything in the draft KV (after an error left it in an unknown state)."""
        self.tree.cache.reset()
        self.kv.reset()

    def drop_tree(self) -> None:
        self.tree.drop()

    # -- building the tree while the target verifies ---------------------------------------------
    def build_tree(
        self,
        committed: Sequence[int],
        draft: Draft,
        depth: int,
        budget: int,
        fanout: Callable[[int, int], list[int]],
        interrupt: Callable[[], bool],
    ) -> TreeStats:
        """Pre-speculate round T+1 (see :meth:`SpeculationTree.build`); a stop ends it at the next level; under the
        reply's constraints, each branch drafts under them after its own path."""
        base = self.mirror.at(committed) if self.mirror is not None else None
        return self.tree.build(committed, draft, depth, budget, fanout, lambda: interrupt() or self.stopping(),
                               self.read, self.rank, base)


class PromptRead:
    """The draft model reads the prompt on a thread of its own while the target prefills it.

    For a draft on cores (or a device) of its own: its first round then drafts at once instead of first
    catching up on the whole prompt. The drafter belongs to that thread until :meth:`join`; a reply whose
    rounds need no draft yet (auto on ar) joins it at its first drafting round, not before its first round.
    """

    def __init__(self, drafter: Drafter, prompt: Sequence[int]) -> None:
        self._drafter = drafter
        self._prompt = list(prompt)
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._read, name="draft-prompt", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            self._drafter.drop_tree()
            self._drafter.kv.sync_out(self._prompt, self._drafter.stopping)
            self._drafter.kv.keep_prompt()
        except PrefillStopped:  # the reply was stopped: what was read stays in the KV
            pass
        except Exception as e:  # the first round catches up instead
            self._error = e

    def busy(self) -> bool:
        """Whether the read still runs (the drafter is not free yet)."""
        return self._thread.is_alive()

    def lag(self, committed: Sequence[int]) -> int:
        """Tokens of ``committed`` the draft will not have seen once the read is done (the reply so far)."""
        return len(committed) - len(self._prompt)

    def join(self) -> None:
        """Wait until the drafter is free again (a failed read leaves its KV to be rebuilt by the first round)."""
        self._thread.join()
        if self._error is not None:
            log.warning("the draft model could not read the prompt ahead: %s", self._error)
            self._drafter.reset()
            self._error = None
