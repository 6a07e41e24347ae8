"""Draft-free speculation: a hashed n-gram pool over the prompt and the conversation.

In the spirit of llama.cpp's ngram-mod: a fixed-size table, indexed by a hash of the last ``n``
tokens, holds the token that followed them most recently. A draft chains lookups (predict the next
token, shift the window, look up again) until the pool has nothing, the length limit is reached or
the chain is too unlikely to be accepted that far, so drafts have variable length. Memory is
constant (the table never grows; it is cleared when half full), and no model runs: a draft costs
microseconds. Here several n-gram orders share one table (distinct hash seeds) and the longest
order that hits predicts; every entry keeps a fingerprint of its n-gram, so a hash collision reads
as "nothing" rather than as a wrong draft.

:class:`Lookup` turns the pool into a speculator that never makes decoding slower: it learns how
often a token predicted by each order is accepted at each place of its chain (a chain's first token is a
guess, a later one mostly a copy in progress), and cuts the draft to the length that maximises the
predicted tokens per second (``E(L) / t_verify(L + 1)``, from the cost model auto also uses); unless
some length beats a plain ar step by LOOKUP_GAIN it drafts nothing, and the round is an ar step. A chain it does
not draft is still scored, for free, against the tokens the target emits next (the chain's first
tokens right, then the first wrong one): the acceptance figures follow the conversation without
paying for a single probe.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from engine.core.context import common_prefix
from engine.core.sampling import Dist

from .costmodel import CostModel, Plan
from .steps import Steps
from .types import NGRAM, Draft, RoundResult

ORDERS = (1, 2, 3, 4)  # n-gram sizes indexed; the longest that hits predicts
POOL_BITS = 19  # 512 Ki entries: 2 MiB of table, whatever the conversation's length
MAX_DRAFT = 16  # the longest lookup draft
MEMO_MOST = 1 << 14  # predictions worked out between two clearings of the pool's memo
# A chain stops once its tokens all being accepted is less likely than this (the pool's acceptance figures): a
# later token would add under a thousandth of a token to a round, and its lookups, its acceptance and the draft
# length that pays were worked out for every token of every round (A: 16 tokens a round, at order 1's 0.2)
REACH_FLOOR = 1e-3

_MASK = (1 << 64) - 1
_MUL = 0x9E3779B97F4A7C15  # 2^64 / golden ratio: spreads the hash over the index bits
_STEP = 0x100000001B3  # FNV prime, the per-token mixing multiplier
_SEED = 0xCBF29CE484222325  # FNV offset basis: the hash of no tokens


class Shadow(NamedTuple):
    """An undrafted chain waiting to be scored against what the target emits."""

    at: int  # the context length it follows
    tokens: list[int]
    orders: list[int]
    depth: int  # the chain place of its first token (a chain scored piece by piece)


class NgramPool:
    """n-gram → next token, in constant memory.

    An n-gram's hash is built from its last token backwards, so one pass over a window's last tokens
    yields the hash of every order (order n: after n tokens); the orders' keys differ as their lengths do.
    """

    def __init__(self, orders: Sequence[int] = ORDERS, bits: int = POOL_BITS) -> None:
        if not orders or min(orders) < 1:
            raise ValueError("n-gram orders must be positive")
        self.orders = tuple(sorted(set(orders), reverse=True))
        self.bits = bits
        self.size = 1 << bits
        self.next = np.full(self.size, -1, dtype=np.int32)
        self.print = np.zeros(self.size, dtype=np.uint32)
        self._next = self.next.data  # scalar reads and writes as Python ints (numpy's cost ~3x more)
        self._print = self.print.data
        self.used = 0
        # Predictions by window (its last orders[0] tokens), each dropped when a slot it read is written: a round's
        # chain mostly walks windows an earlier chain walked, and a prediction costs a few hashes per order.
        self._memo: dict[tuple[int, ...], tuple[int, int] | None] = {}
        self._readers: dict[int, list[tuple[int, ...]]] = {}  # slot -> the windows whose prediction read it
        self._worked = 0  # predictions worked out since the memo was cleared (bounds both tables)

    def reset(self) -> None:
        self.next.fill(-1)
        self.used = 0
        self._forget()

    def _forget(self) -> None:
        self._memo.clear()
        self._readers.clear()
        self._worked = 0

    def _hashes(self, tokens: Sequence[int], end: int) -> list[int]:
        """The hashes of the n-grams ending before ``tokens[end]``, by order: [order 1, order 2, ...]."""
        out: list[int] = []
        h = _SEED
        for n in range(1, min(self.orders[0], end) + 1):
            h = ((h * _STEP) + tokens[end - n] + 1) & _MASK
            out.append(h)
        return out

    def _slot(self, h: int) -> tuple[int, int]:
        """A hash's table index and fingerprint."""
        return ((h * _MUL) & _MASK) >> (64 - self.bits), (h ^ (h >> 32)) & 0xFFFFFFFF

    def feed(self, tokens: Sequence[int], start: int = 0) -> None:
        """Record, for every position i >= ``start``, that tokens[i-n:i] was followed by tokens[i]."""
        n_tok = len(tokens)
        if n_tok - max(start, 1) > 64:
            self._feed_vector(np.asarray(tokens, dtype=np.uint64), max(start, 1))
            return
        for i in range(max(start, 1), n_tok):  # a round's few new tokens: no array of the whole context
            token = int(tokens[i])
            hashes = self._hashes(tokens, i)
            for n in self.orders:  # longest first
                if n <= len(hashes):
                    self._put(*self._slot(hashes[n - 1]), token)

    def _put(self, idx: int, fp: int, token: int) -> None:
        readers = self._readers.pop(idx, None)
        if readers is not None:
            for window in readers:
                self._memo.pop(window, None)
        if self._next[idx] < 0:
            self.used += 1
        self._next[idx] = token
        self._print[idx] = fp
        if self.used * 2 > self.size:  # half full: collisions would start to evict live entries
            self.reset()

    def _feed_vector(self, arr: np.ndarray, start: int) -> None:
        self._forget()  # it writes slots by the thousand
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        with np.errstate(over="ignore"):
            h = np.full(len(arr), _SEED, dtype=np.uint64)  # h[i]: the hash of the n tokens before position i
            for n in range(1, self.orders[0] + 1):
                h[n:] = h[n:] * np.uint64(_STEP) + arr[: len(arr) - n] + np.uint64(1)
                if n in self.orders:
                    pos = np.arange(max(start, n), len(arr))  # predicted positions
                    hp = h[pos]
                    idx = ((hp * np.uint64(_MUL)) >> np.uint64(64 - self.bits)).astype(np.int64)
                    fp = ((hp ^ (hp >> np.uint64(32))) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
                    parts.append((pos, idx, fp))
        parts.reverse()  # longest order first within a position, as the scalar path writes
        pos = np.concatenate([p for p, _, _ in parts])
        idx = np.concatenate([i for _, i, _ in parts])
        fp = np.concatenate([f for _, _, f in parts])
        order = np.argsort(pos, kind="stable")  # position by position: the scalar order
        idx, fp, pos = idx[order], fp[order], pos[order]
        self.used += _distinct(idx[self.next[idx] < 0])
        self.next[idx] = arr[pos].astype(np.int32)  # the last write to a slot wins, as in the scalar path
        self.print[idx] = fp
        if self.used * 2 > self.size:
            self.reset()
            self._feed_vector(arr[-self.size // 16 :], 1)  # keep the most recent context

    def predict(self, window: Sequence[int]) -> tuple[int, int] | None:
        """The next token after ``window`` and the order that predicted it, or None."""
        key = tuple(window[-self.orders[0] :])
        memo = self._memo
        if key in memo:
            return memo[key]
        if self._worked >= MEMO_MOST:
            self._forget()
        self._worked += 1
        hit = memo[key] = self._predict(key)
        return hit

    def _predict(self, window: tuple[int, ...]) -> tuple[int, int] | None:
        """:meth:`predict` worked out: each slot it reads notes the window (a write there drops the prediction)."""
        hashes = self._hashes(window, len(window))
        readers = self._readers
        for n in self.orders:  # longest first
            if n <= len(hashes):
                idx, fp = self._slot(hashes[n - 1])
                readers.setdefault(idx, []).append(window)
                tok = self._next[idx]
                if tok >= 0 and self._print[idx] == fp:
                    return tok, n
        return None

    def draft(self, context: Sequence[int], max_len: int,
              acceptance: Callable[[int, int], float] | None = None) -> tuple[list[int], list[int]]:
        """Chain up to ``max_len`` predictions after ``context``: the tokens and the order of each. With
        ``acceptance`` (by order and chain place), the chain ends at the first token whose reach (the chance
        that it and all before it are accepted) falls below REACH_FLOOR."""
        chain = list(context[len(context) - self.orders[0] :])  # the window, then each prediction appended
        start = len(chain)
        orders: list[int] = []
        reach = 1.0
        while len(orders) < max_len:
            hit = self.predict(chain)
            if hit is None:
                break
            chain.append(hit[0])
            orders.append(hit[1])
            if acceptance is not None:
                reach *= acceptance(hit[1], len(orders) - 1)
                if reach < REACH_FLOOR:
                    break
        return chain[start:], orders


def _distinct(values: np.ndarray) -> int:
    """How many distinct values an int array holds (np.unique's first call imports numpy.ma: 60 ms of a reply)."""
    if not len(values):
        return 0
    s = np.sort(values)
    return 1 + int(np.count_nonzero(s[1:] != s[:-1]))


class Lookup:
    """The pool as a speculator: fed with the context, drafts cut to the length that pays.

    One per engine: the pool follows the conversation from turn to turn, and the acceptance figures
    (in the shared :class:`CostModel`) outlive a reply. Used by one thread at a time (the target's,
    or the draft thread while the target waits).
    """

    def __init__(self, model: CostModel, pool: NgramPool | None = None) -> None:
        self.model = model
        self.pool = pool or NgramPool()
        self._fed: list[int] = []  # the sequence fed so far (prefix of the current context)
        self._shadows: list[Shadow] = []  # undrafted chains being scored: the oldest still right, the newest

    def start(self, context: Sequence[int]) -> None:
        """A new generation. A context that continues the one fed so far (the next turn of the
        conversation) feeds only what is new; any other (another conversation, a regenerated reply)
        starts the pool afresh, so it only ever holds the context at hand."""
        n = common_prefix(self._fed, context)
        if n < len(self._fed):
            self.pool.reset()
            n = 0
        self.pool.feed(context, start=n)
        self._fed = list(context)
        self._shadows = []  # a chain kept from the previous reply would be scored against the user's text

    def _continues(self, context: Sequence[int]) -> bool:
        """Whether ``context`` extends the sequence fed so far (as it does within one generation)."""
        n = len(self._fed)
        return len(context) >= n and (not n or context[n - 1] == self._fed[-1])

    def sync(self, context: Sequence[int]) -> None:
        """Feed what the context gained since the previous call (it only grows within a generation)."""
        n = len(self._fed)
        if not self._continues(context):
            self.start(context)
            return
        if len(context) > n:
            self.pool.feed(context, start=n)
            self._fed.extend(context[n:])

    def candidate(self, context: Sequence[int], max_len: int = MAX_DRAFT) -> tuple[list[int], list[int]]:
        """The pool's chain after ``context`` (fed first) as far as it may be accepted, before the cost cut."""
        self.sync(context)
        return self.pool.draft(context, max_len, self.model.lookup_acceptance)

    def choose(self, context: Sequence[int], max_len: int = MAX_DRAFT, *, greedy: bool = True,
               shadow: bool = True) -> tuple[Draft, float]:
        """The draft that maximises predicted tokens per second (empty when a plain ar step is better)
        and that rate. With ``shadow``, the chain (before the cut) is kept and scored against what the target emits
        next (:meth:`score_shadows`), unless the round verifies a draft (then :meth:`learn` scores it);
        without, the caller scores the draft it verifies (ssd's backup)."""
        t0 = time.perf_counter()
        if shadow:
            self.score_shadows(context)
        tokens, orders = self.candidate(context, max_len)
        expected = self.model.lookup_expected(orders)
        length, rate = self.model.lookup_length(expected)
        if shadow and tokens:
            self._shadows.append(Shadow(len(context), tokens, orders, 0))
        d = make_draft(tokens[:length], orders[:length], greedy)
        d.expected = expected[length]
        d.serve_s = time.perf_counter() - t0
        return d, rate

    def propose(self, context: Sequence[int], max_len: int = MAX_DRAFT, *, greedy: bool = True,
                shadow: bool = True) -> Draft:
        return self.choose(context, max_len, greedy=greedy, shadow=shadow)[0]

    def score_shadows(self, context: Sequence[int]) -> None:
        """Score the chains kept by earlier :meth:`choose` calls against the tokens emitted since: a chain's
        right tokens count as accepted and its first wrong one as rejected, as a verified draft would have
        gone. A chain still right as far as the context reaches waits for more tokens (its later places are
        scored at their depth); of the chains that wait only the oldest is kept, the copy in progress."""
        if not self._continues(context):
            self._shadows = []  # another context: nothing to score
            return
        waiting: list[Shadow] = []
        for chain in self._shadows:
            at, tokens, orders, depth = chain
            emitted = context[at : at + len(tokens)]
            if not emitted:
                waiting.append(chain)
                continue
            right = 0
            while right < len(emitted) and emitted[right] == tokens[right]:
                right += 1
            if right < len(emitted) or right == len(tokens):  # the chain's end or its first wrong token is known
                self.model.learn_lookup(orders, right, depth)
            else:  # right as far as the context reaches: the rest of the chain waits
                self.model.learn_lookup(orders[:right], right, depth)
                waiting.append(Shadow(at + right, tokens[right:], orders[right:], depth + right))
        self._shadows = waiting[:1]

    def drop_shadows(self) -> None:
        """A round verified a pool draft (a lookup round, or ssd's backup from the pool): its chain, the one
        kept as a shadow, is scored with that round; scoring it again as a shadow would count it twice."""
        self._shadows = []

    def learn(self, rr: RoundResult, *, timed: bool = True) -> None:
        """Fold a lookup round into the cost model: measured against predicted, verify time by width (unless not
        ``timed``: auto's round beside the draft's prompt read), acceptance by n-gram order and depth."""
        if rr.drafted:
            self.drop_shadows()  # the round verified a draft: scored below
        m = self.model
        d = rr.draft
        orders = d.orders[: rr.drafted] if d is not None else []
        if timed:
            measured = rr.drafted + 1 in m.verify  # a prediction from measured figures, not from the defaults
            m.add_verify(rr.drafted + 1, rr.verify_s)  # first: the prediction is at the pace the round showed
            if measured:
                m.observe(Plan("lookup") if rr.drafted else Plan("ar"), len(rr.tokens), rr.verify_s + rr.wait_s,
                          m.lookup_expected(orders)[-1], m.t_verify(rr.drafted + 1))
        if d is not None and d.source == NGRAM and rr.drafted:
            m.learn_lookup(orders, rr.accepted)


def make_draft(tokens: list[int], orders: list[int], greedy: bool) -> Draft:
    """A lookup draft: q is one-hot (a deterministic proposal), so sampled verification accepts d with p(d)."""
    q = None if greedy else [Dist.one_hot(t) for t in tokens]
    d = Draft(tokens, q, NGRAM)
    d.orders = orders
    return d


class LookupMode:
    """Draft-free speculative decoding: each round verifies the pool's draft, or is an ar step when it has none."""

    name = "lookup"

    def __init__(self, steps: Steps, lookup: Lookup, *, greedy: bool, max_len: int = MAX_DRAFT) -> None:
        self.steps = steps
        self.lookup = lookup
        self.greedy = greedy
        self.max_len = max_len

    def step(self) -> RoundResult:
        d = self.lookup.propose(self.steps.target.committed, self.max_len, greedy=self.greedy)
        rr = self.steps.lookup(d)
        self.lookup.learn(rr)
        return rr

    def close(self) -> None:
        self.steps.close()
