"""The n-gram pool behind draft-free speculation (:mod:`engine.speculative.lookup`).

In the spirit of llama.cpp's ngram-mod: a fixed-size table, indexed by a hash of the last ``n``
tokens, holds the token that followed them most recently. A draft chains lookups (predict the next
token, shift the window, look up again) until the pool has nothing, the length limit is reached or
the chain is too unlikely to be accepted that far, so drafts have variable length. Memory is
constant (the table never grows; it is cleared when half full), and no model runs: a draft costs
microseconds. Several n-gram orders share one table (distinct hash seeds) and the longest order
that hits predicts; every entry keeps a fingerprint of its n-gram, so a hash collision reads as
"nothing" rather than as a wrong draft.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

ORDERS = (1, 2, 3, 4)  # n-gram sizes indexed; the longest that hits predicts
POOL_BITS = 19  # 512 Ki entries: 2 MiB of table, whatever the conversation's length
MEMO_MOST = 1 << 14  # predictions worked out between two clearings of the pool's memo
# A chain stops once its tokens all being accepted is less likely than this (the pool's acceptance figures): a
# later token would add under a thousandth of a token to a round, and its lookups, its acceptance and the draft
# length that pays were worked out for every token of every round (A: 16 tokens a round, at order 1's 0.2)
REACH_FLOOR = 1e-3

_MASK = (1 << 64) - 1
_MUL = 0x9E3779B97F4A7C15  # 2^64 / golden ratio: spreads the hash over the index bits
_STEP = 0x100000001B3  # FNV prime, the per-token mixing multiplier
_SEED = 0xCBF29CE484222325  # FNV offset basis: the hash of no tokens


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
        self._seen: tuple[tuple[int, ...], list[tuple[int, int]]] = ((), [])  # the latest window worked out

    def reset(self) -> None:
        self.next.fill(-1)
        self.used = 0
        self._forget()

    def _forget(self) -> None:
        self._memo.clear()
        self._readers.clear()
        self._worked = 0

    def _slots(self, tokens: Sequence[int], end: int) -> list[tuple[int, int]]:
        """The table index and fingerprint of each n-gram ending before ``tokens[end]``, by order: [order 1,
        order 2, ...] (one pass: a round computes these for every token it feeds and every window it predicts)."""
        out: list[tuple[int, int]] = []
        h, shift = _SEED, 64 - self.bits
        for n in range(1, min(self.orders[0], end) + 1):
            h = ((h * _STEP) + tokens[end - n] + 1) & _MASK
            out.append((((h * _MUL) & _MASK) >> shift, (h ^ (h >> 32)) & 0xFFFFFFFF))
        return out

    def feed(self, tokens: Sequence[int], start: int = 0) -> None:
        """Record, for every position i >= ``start``, that tokens[i-n:i] was followed by tokens[i]."""
        n_tok = len(tokens)
        if n_tok - max(start, 1) > 64:
            self._feed_vector(np.asarray(tokens, dtype=np.uint64), max(start, 1))
            return
        top = self.orders[0]
        for i in range(max(start, 1), n_tok):  # a round's few new tokens: no array of the whole context
            token = int(tokens[i])
            # the window before a round's new token is the one the previous round predicted after
            seen = self._seen
            slots = seen[1] if i >= top and seen[0] == tuple(tokens[i - top : i]) else self._slots(tokens, i)
            for n in self.orders:  # longest first
                if n <= len(slots):
                    self._put(*slots[n - 1], token)

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
        slots = self._slots(window, len(window))
        self._seen = (window, slots)
        readers = self._readers
        for n in self.orders:  # longest first
            if n <= len(slots):
                idx, fp = slots[n - 1]
                readers.setdefault(idx, []).append(window)
                tok = self._next[idx]
                if tok >= 0 and self._print[idx] == fp:
                    return tok, n
        return None

    def knows(self, context: Sequence[int]) -> bool:
        """Whether the pool predicts a token after ``context`` (as :meth:`predict` would; nothing is remembered but
        the window's slots, which the next token fed reuses)."""
        window = tuple(context[-self.orders[0] :])
        if window in self._memo:
            return self._memo[window] is not None
        slots = self._slots(window, len(window))
        self._seen = (window, slots)
        nxt, prints = self._next, self._print
        for n in self.orders:
            if n <= len(slots):
                idx, fp = slots[n - 1]
                if nxt[idx] >= 0 and prints[idx] == fp:
                    return True
        return False

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
