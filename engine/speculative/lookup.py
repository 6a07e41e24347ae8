"""Draft-free speculation: a hashed n-gram pool over the prompt and the conversation (:mod:`.pool`).

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
from collections.abc import Sequence
from typing import NamedTuple

from engine.core.kvtrack import common_prefix
from engine.core.mode import Mode
from engine.core.sampling import Dist

from .costmodel import CostModel
from .plan import Plan
from .pool import ORDERS, NgramPool
from .steps import Steps
from .types import NGRAM, Draft, RoundResult

__all__ = ["MAX_DRAFT", "ORDERS", "Lookup", "LookupMode", "NgramPool", "make_draft"]

MAX_DRAFT = 16  # the longest lookup draft
FOLD_AFTER = 4096  # plain steps kept before they are folded into the model anyway (bounds the list)
_AR, _LOOKUP = Plan(Mode.AR), Plan(Mode.LOOKUP)


class Shadow(NamedTuple):
    """An undrafted chain waiting to be scored against what the target emits."""

    at: int  # the context length it follows
    tokens: list[int]
    orders: list[int]
    depth: int  # the chain place of its first token (a chain scored piece by piece)


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
        # Plain steps' (verify seconds, round seconds, tokens) not yet folded into the model: folded, in order,
        # before the model is next read (a decision, or the reply's end, where a fixed mode's rounds are folded
        # too), so a round the pool cannot draft in costs what an ar round costs and the model learns each step
        self._steps: list[tuple[float, float, int, bool]] = []

    def start(self, context: Sequence[int]) -> None:
        """A new generation. A context that continues the one fed so far (the next turn of the
        conversation) feeds only what is new; any other (another conversation, a regenerated reply)
        starts the pool afresh, so it only ever holds the context at hand."""
        self.fold()
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
        self.fold()
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
        """:meth:`choose`'s draft. Where the pool has nothing after ``context`` the draft is empty and no figure of
        the model is read: the round is a plain step, at a plain step's cost."""
        t0 = time.perf_counter()
        if shadow and self._shadows:
            self.score_shadows(context)
        self.sync(context)
        if self.pool.knows(context):
            return self.choose(context, max_len, greedy=greedy, shadow=shadow)[0]  # scored and fed: no-ops now
        d = Draft([], None, NGRAM)
        d.serve_s = time.perf_counter() - t0
        return d

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

    def takeover(self, context: Sequence[int], emitted: Sequence[int], beat: float) -> int:
        """How many of ``emitted`` (a drafting round's tokens after ``context``) came before the pool would have drafted
        the next one, right, at a predicted rate above ``beat`` (the round's plan's: auto would have taken it; asked
        before the pool is fed them): where it would have taken over, a copy resuming."""
        seq = [*context[-self.pool.orders[0] :], *emitted]
        start = len(seq) - len(emitted)
        m = self.model
        for j in range(1, len(emitted)):
            tokens, orders = self.pool.draft(seq[: start + j], MAX_DRAFT, m.lookup_acceptance)
            if not tokens or tokens[0] != emitted[j]:
                continue
            length, rate = m.lookup_length(m.lookup_expected(orders))
            if length and rate > beat:
                return j
        return len(emitted)

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
        if timed and not rr.drafted:
            self._steps.append((rr.verify_s, rr.verify_s + rr.wait_s, len(rr.tokens), rr.new_shape))
            if len(self._steps) >= FOLD_AFTER:
                self.fold()
        elif timed:
            self.fold()
            measured = rr.drafted + 1 in m.verify  # a prediction from measured figures, not from the defaults
            m.add_verify(rr.drafted + 1, rr.verify_s, build=rr.new_shape)  # first: the round's pace predicts it
            if measured and not rr.new_shape:  # a graph build's time is not the pool's
                m.observe(_LOOKUP, len(rr.tokens), rr.verify_s + rr.wait_s, m.lookup_expected(orders)[-1],
                          m.t_verify(rr.drafted + 1))
        if d is not None and d.source == NGRAM and rr.drafted:
            m.learn_lookup(orders, rr.accepted)


    def fold(self) -> None:
        """Fold the plain steps kept by :meth:`learn` into the model, as each would have been folded then."""
        m = self.model
        for verify_s, seconds, tokens, build in self._steps:
            measured = 1 in m.verify
            m.add_verify(1, verify_s, build=build)
            if measured and not build:
                m.observe(_AR, tokens, seconds, 1.0, m.t_verify(1))
        self._steps.clear()


def make_draft(tokens: list[int], orders: list[int], greedy: bool) -> Draft:
    """A lookup draft: q is one-hot (a deterministic proposal), so sampled verification accepts d with p(d)."""
    q = None if greedy else [Dist.one_hot(t) for t in tokens]
    d = Draft(tokens, q, NGRAM)
    d.orders = orders
    return d


class LookupMode:
    """Draft-free speculative decoding: each round verifies the pool's draft, or is an ar step when it has none."""

    name = Mode.LOOKUP

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
        self.lookup.fold()  # the model is read once the reply ends
        self.steps.close()
