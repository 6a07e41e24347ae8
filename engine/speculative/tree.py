"""The speculation tree: round T+1 pre-drafted for the likely outcomes of round T, while the target verifies T.

Sequence 0 of the draft context holds the committed path; sequences 1..M are the branches, each
sharing the committed prefix through ``seq_cp`` in a unified KV cache (tagging cells, no copy).
A branch is keyed by the outcome it assumes: how many drafts the target accepts, and the token it
emits next (see :mod:`engine.speculative.speccache`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from engine.core.constraints import Constraint
from engine.core.context import Context
from engine.core.kvtrack import KVTrack
from engine.core.outputs import Outputs
from engine.core.sampling import Dist

from .constrained import follow
from .speccache import Branch, SpecCache
from .types import Draft, IdRow, TreeStats

# output r, its position, the constraints after the branch's path (if any) -> token, q, best ids
Read = Callable[[Outputs, int, int, Constraint | None], tuple[int, Dist | None, IdRow]]
Rank = Callable[[Outputs, int, int], IdRow]  # output r, the position it predicts -> its best ids


class SpeculationTree:
    """The branches of the latest round and the draft they were built on."""

    def __init__(self, ctx: Context, kv: KVTrack, is_eog: Callable[[int], bool], max_branches: int) -> None:
        self.ctx = ctx
        self.kv = kv
        self.is_eog = is_eog
        self.max_branches = max_branches
        self.cache = SpecCache()
        self.assumed: list[int] = []  # the draft whose verification outcomes the branches assume

    def find(self, committed: Sequence[int], accepted: int) -> Branch | None:
        """The branch for the outcome that happened (``accepted`` drafts, then ``committed[-1]``), if built."""
        if accepted < 0:
            return None
        branch = self.cache.lookup(len(committed), accepted, committed[-1])
        if branch is not None and list(committed[self.cache.base_len : -1]) != self.assumed[:accepted]:
            return None  # the tree assumed other accepted tokens (e.g. an ar round came between)
        return branch

    def drop(self) -> None:
        """Free every branch's sequence."""
        for b in self.cache.branches():
            self.ctx.seq_rm(b.seq_id, -1, -1)
        self.cache.reset()

    def build(
        self,
        committed: Sequence[int],
        draft: Draft,
        depth: int,
        budget: int,
        fanout: Callable[[int, int], list[int]],
        interrupt: Callable[[], bool],
        read: Read,
        rank: Rank,
        constraint: Constraint | None = None,
    ) -> TreeStats:
        """Pre-speculate round T+1 for the likely outcomes of verifying ``draft`` after ``committed``.

        ``fanout(L, budget)`` gives the per-position branch counts (length L+1); ``rank`` orders the candidates at
        each position (coupled sampling: the draft's next choices under that position's noise). Stops between levels
        when ``interrupt()`` is true (the next request has arrived). With ``constraint`` (the reply's, after committed)
        a branch whose path the constraints refuse is not built (the target can never emit it), and every other one
        drafts under the constraints after its path.
        """
        t0 = time.perf_counter()
        stats = TreeStats()
        toks = draft.tokens
        n_draft = len(toks)
        base = len(committed)
        p_r = base - 1  # position of the pending token r
        self.cache.reset(base_len=base)
        self.assumed = list(toks)
        if n_draft == 0 or budget <= 0 or depth <= 0:
            return stats
        tops = list(draft.top)
        if len(tops) < n_draft:  # n-gram draft: run the glue pass for rows 0..L-1 now
            keep = self.kv.keeps(committed)  # p_r at most
            self.kv.trim(keep)
            keep = len(self.kv.tokens)  # a recurrent state may have gone back further
            if keep < p_r:
                self.ctx.prefill_out(committed[keep:p_r], start=keep)
                self.kv.tokens.extend(committed[keep:p_r])
            glue = [committed[-1], *toks[:-1]]
            glue_out = self.ctx.decode_out(glue, range(p_r, p_r + n_draft), 0, range(n_draft))
            self.kv.tokens.extend(glue)
            tops = [rank(glue_out, r, base + r) for r in range(n_draft)]
        if interrupt():
            return stats
        # Glue row L: the draft's view after the whole draft.
        t_glue = time.perf_counter()
        tops.append(rank(self.kv.decode_one(toks[-1]), 0, base + n_draft))
        stats.glue_s = time.perf_counter() - t_glue
        ends_eog = self.is_eog(toks[-1])
        counts = fanout(n_draft, min(budget, self.max_branches))
        branches: list[Branch] = []
        states: dict[int, Constraint | None] = {}  # per branch's sequence: the constraints after its path
        sid = 1
        # A recurrent state holds only the newest position: branches can start after the whole draft only.
        recurrent = self.ctx.kind.recurrent
        prefix = constraint  # the constraints after toks[:j]; None once the draft leaves them
        for j in range(n_draft + 1):
            if j == n_draft and ends_eog:
                break
            if j > 0:
                prefix = follow(prefix, toks[j - 1:j])  # one step on from toks[:j-1], not the whole path again
            excl = toks[j] if j < n_draft else None
            cands = [int(t) for t in tops[j] if int(t) != excl][: counts[j] if j < len(counts) else 0]
            for t in cands:
                if sid > self.max_branches or (recurrent and j < n_draft):
                    break
                state = follow(prefix, [t])
                if constraint is not None and state is None:
                    continue
                states[sid] = state
                self.ctx.seq_cp(0, sid, 0, p_r + j + 1)
                br = Branch(accepted=j, token=t, seq_id=sid, pos0=p_r + j + 1)
                branches.append(br)
                self.cache.add(br)
                sid += 1
        stats.branches = len(branches)
        live = [b for b in branches if not self.is_eog(b.token)]
        t_levels = time.perf_counter()
        for lvl in range(depth):
            if not live or interrupt():
                break
            out = self.ctx.decode_out(
                [b.token if lvl == 0 else b.tokens[-1] for b in live],
                [b.pos0 + lvl for b in live],
                [b.seq_id for b in live],
                range(len(live)),
            )
            for r, b in enumerate(live):
                state = states.get(b.seq_id)
                tok, q, top = read(out, r, b.pos0 + lvl + 1, state)  # rows read in place: no vocabulary-sized copy
                if state is not None:
                    state.accept(tok)  # drafted under the state: allowed
                b.top.append(top)
                b.tokens.append(tok)
                if q is not None:
                    b.q.append(q)
            live = [b for b in live if not self.is_eog(b.tokens[-1])]
            stats.levels = lvl + 1
        done = time.perf_counter()
        stats.level_s = done - t_levels
        stats.seconds = done - t0
        return stats
