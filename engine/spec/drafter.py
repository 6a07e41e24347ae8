"""The draft model's side: sequential drafting, n-gram backup and the speculation tree.

A :class:`Drafter` owns the draft context. Sequence 0 holds the committed path; sequences
1..M are the branches of the speculation tree, each sharing the committed prefix through
``seq_cp`` in a unified KV cache (tagging cells, no copy).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from engine.core.context import Context, KVTrack, common_prefix
from engine.core.sampling import Dist, SamplingParams, argmax, sample, to_dist, top_ids

from . import fanout as fanout_mod
from . import ngram
from .speccache import Branch, SpecCache

IdRow = npt.NDArray[np.int64]


@dataclass(slots=True)
class Draft:
    """Draft tokens for one round, with the exact q each was sampled from (None when greedy)."""

    tokens: list[int]
    q: list[Dist] | None
    hit: bool = False
    backup: str | None = None  # "jit", "ngram" or None (a cache hit)
    top: list[IdRow] = field(default_factory=list)  # best ids of the rows that produced the tokens
    serve_s: float = 0.0


@dataclass(slots=True)
class TreeStats:
    levels: int = 0
    branches: int = 0
    seconds: float = 0.0


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
        self.cache = SpecCache()
        self._tree_draft: list[int] = []
        self.params = SamplingParams()
        self.rng = np.random.default_rng(0)
        self.top_count = 4
        self._threads = ctx.params.n_threads

    def configure(self, params: SamplingParams, rng: np.random.Generator, top_count: int) -> None:
        self.params = params
        self.rng = rng
        self.top_count = max(2, top_count)
        self.drop_tree()

    def set_threads(self, n: int) -> None:
        if n != self._threads:
            self.ctx.set_threads(n, n)
            self._threads = n

    def pick(self, row: npt.NDArray[np.float32]) -> tuple[int, Dist | None]:
        if self.params.greedy:
            return argmax(row), None
        q = to_dist(row, self.params)
        return sample(q, self.rng), q

    # -- sequential (JIT) drafting, also plain SD's drafter ---------------------------------------
    def draft_sequential(self, committed: Sequence[int], k: int) -> Draft:
        """Draft ``k`` tokens one at a time after ``committed``; the KV ends at committed + d[:-1]."""
        t0 = time.perf_counter()
        row = self.kv.sync(committed)
        tokens: list[int] = []
        qs: list[Dist] = []
        tops: list[IdRow] = []
        for i in range(k):
            tops.append(top_ids(row, self.top_count))
            tok, q = self.pick(row)
            tokens.append(tok)
            if q is not None:
                qs.append(q)
            if self.is_eog(tok) or i == k - 1:
                break
            row = self.kv.decode_one(tok)
        return Draft(tokens, None if self.params.greedy else qs, backup="jit", top=tops,
                     serve_s=time.perf_counter() - t0)

    def draft_ngram(self, committed: Sequence[int], k: int) -> Draft | None:
        """Prompt-lookup draft (q one-hot), or None when the context has no match."""
        toks = ngram.lookup(committed, num_pred=k)
        if not toks:
            return None
        q = None if self.params.greedy else [Dist.one_hot(t) for t in toks]
        return Draft(toks, q, backup="ngram")

    # -- serving a round in SSD ----------------------------------------------------------------
    def serve(self, committed: Sequence[int], accepted: int, k: int, backup: str) -> Draft:
        """Answer a request: the cached branch on a hit, else the backup speculator."""
        t0 = time.perf_counter()
        branch = self.cache.lookup(len(committed), accepted, committed[-1]) if accepted >= 0 else None
        if branch is not None and list(committed[self.cache.base_len : -1]) != self._tree_draft[:accepted]:
            branch = None  # the tree assumed other accepted tokens (e.g. an ar round came between)
        if branch is not None:
            self._promote(branch, committed)
            n = min(k, branch.depth)
            self.kv.trim(len(committed) + n - 1)
            return Draft(branch.tokens[:n], None if self.params.greedy else branch.q[:n], hit=True,
                         top=branch.top[:n], serve_s=time.perf_counter() - t0)
        self.drop_tree()
        if backup == "ngram":
            d = self.draft_ngram(committed, k)
            if d is not None:
                d.serve_s = time.perf_counter() - t0
                return d
        d = self.draft_sequential(committed, k)
        d.serve_s = time.perf_counter() - t0
        return d

    def _promote(self, branch: Branch, committed: Sequence[int]) -> None:
        p = branch.pos0
        self.ctx.seq_rm(0, p, -1)
        self.ctx.seq_cp(branch.seq_id, 0, p, -1)
        new_tail = [branch.token, *branch.tokens[: branch.depth - 1]]
        self.kv.tokens[p:] = new_tail
        self.drop_tree()
        assert self.kv.tokens[: len(committed)] == list(committed), "promoted branch diverges from committed"

    def reset(self) -> None:
        """Forget everything in the draft KV (after an error left it in an unknown state)."""
        self.cache.reset()
        self.kv.reset()

    def drop_tree(self) -> None:
        for b in self.cache.branches():
            self.ctx.seq_rm(b.seq_id, -1, -1)
        self.cache.reset()

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
        """Pre-speculate round T+1 for the likely outcomes of verifying ``draft`` after ``committed``.

        ``fanout(L, budget)`` gives the per-position branch counts (length L+1). Stops between levels
        when ``interrupt()`` is true (the next request has arrived).
        """
        t0 = time.perf_counter()
        stats = TreeStats()
        toks = draft.tokens
        n_draft = len(toks)
        base = len(committed)
        p_r = base - 1  # position of the pending token r
        self.cache.reset(base_len=base)
        self._tree_draft = list(toks)
        if n_draft == 0 or budget <= 0 or depth <= 0:
            return stats
        tops = list(draft.top)
        if len(tops) < n_draft:  # n-gram draft: run the glue pass for rows 0..L-1 now
            keep = min(common_prefix(self.kv.tokens, committed), p_r)
            self.kv.trim(keep)
            if keep < p_r:
                self.ctx.prefill(committed[keep:p_r], start=keep)
                self.kv.tokens.extend(committed[keep:p_r])
            glue = [committed[-1], *toks[:-1]]
            rows = self.ctx.decode(glue, list(range(p_r, p_r + n_draft)), 0, list(range(n_draft)))
            self.kv.tokens.extend(glue)
            tops = [top_ids(r, self.top_count) for r in rows]
        if interrupt():
            return stats
        # Glue row L: the draft's view after the whole draft.
        last_row = self.kv.decode_one(toks[-1])
        tops.append(top_ids(last_row, self.top_count))
        ends_eog = self.is_eog(toks[-1])
        counts = fanout(n_draft, min(budget, self.max_branches))
        branches: list[Branch] = []
        sid = 1
        for j in range(n_draft + 1):
            if j == n_draft and ends_eog:
                break
            excl = toks[j] if j < n_draft else None
            cands = [int(t) for t in tops[j] if int(t) != excl][: counts[j] if j < len(counts) else 0]
            for t in cands:
                if sid > self.max_branches:
                    break
                self.ctx.seq_cp(0, sid, 0, p_r + j + 1)
                br = Branch(k=j, token=t, seq_id=sid, pos0=p_r + j + 1)
                branches.append(br)
                self.cache.add(br)
                sid += 1
        stats.branches = len(branches)
        live = [b for b in branches if not self.is_eog(b.token)]
        for lvl in range(depth):
            if not live or interrupt():
                break
            rows = self.ctx.decode(
                [b.token if lvl == 0 else b.tokens[-1] for b in live],
                [b.pos0 + lvl for b in live],
                [b.seq_id for b in live],
                list(range(len(live))),
            )
            for b, row in zip(live, rows, strict=True):
                b.top.append(top_ids(row, self.top_count))
                tok, q = self.pick(row)
                b.tokens.append(tok)
                if q is not None:
                    b.q.append(q)
            live = [b for b in live if not self.is_eog(b.tokens[-1])]
            stats.levels = lvl + 1
        stats.seconds = time.perf_counter() - t0
        return stats


def fanout_fn(geometric: bool, acceptance: float) -> Callable[[int, int], list[int]]:
    def alloc(k: int, budget: int) -> list[int]:
        return fanout_mod.allocate(k, budget, geometric_on=geometric, acceptance=acceptance)

    return alloc
