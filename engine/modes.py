"""A reply's mode, built over one target sequence: ar, lookup, sd, ssd or auto (with the draft model or without)."""

from __future__ import annotations

import functools

from .config import GenerationParams
from .core.mode import Mode
from .drafting import DraftSide
from .speculative.auto import AutoMode
from .speculative.costmodel import CostModel
from .speculative.drafter import PromptRead
from .speculative.lookup import Lookup, LookupMode
from .speculative.planner import AutoPlanner
from .speculative.ssd import SSDMode, SSDOptions
from .speculative.steps import ARMode, Decoder, SDMode, Steps
from .speculative.target import Target
from .speculative.types import NGRAM
from .speculative.worker import DraftWorker, InlineDrafts, SplitDrafts
from .stats import StatsRecorder


class ModeMaker(DraftSide):
    """Mixin of :class:`~engine.engine.Engine`: builds the mode a reply runs while it is alone."""

    _lookup: Lookup
    _cost_model: CostModel

    def _make_mode(self, target: Target, params: GenerationParams, budget: int, reading: PromptRead | None = None,
                   recorder: StatsRecorder | None = None) -> Decoder:
        """The reply's mode on ``target``; ``budget``: fixed ssd's tree (observer.tree_budget). auto may start while
        the draft still reads the prompt (``reading``): its drafter waits for it at first use (the wait:
        ``recorder``)."""
        if params.mode is Mode.AR:
            return ARMode(Steps(target, None))
        k = params.k
        greedy = params.sampling.greedy
        lookup = self._lookup
        lookup.start(target.committed)
        if params.mode is Mode.LOOKUP:
            return LookupMode(Steps(target, None, self.threads), lookup, greedy=greedy)
        if self.drafter is None:  # auto on a target alone: ar, and the pool's drafts when they pay
            planner = AutoPlanner(self._cost_model, k, draft=False)
            return AutoMode(Steps(target, None, self.threads), planner, SSDOptions(k=k), lookup, greedy)
        self.drafter.pool_draft = lambda committed, n: lookup.propose(committed, n, greedy=greedy,
                                                                                 shadow=False)
        if params.mode is Mode.SD:
            return SDMode(Steps(target, InlineDrafts(self.drafter)), k)  # the draft runs on this thread
        ready = functools.partial(self._join_read, reading, recorder) if reading and recorder else None
        drafts = SplitDrafts(self.drafter, ready) if params.mode is Mode.AUTO else DraftWorker(self.drafter)
        steps = Steps(target, drafts, self.threads)
        if params.mode is Mode.AUTO:
            # read before the draft thread starts (during a prompt read: what the read will have left; a read that
            # fails leaves the whole context to the first drafting round, which then catches up, unpriced)
            lag = reading.lag(target.committed) if reading else self.drafter.lag(target.committed)
            self._cost_model.acceptance.new_text()
            planner = AutoPlanner(self._cost_model, k, adaptive=params.adaptive,
                                  max_branches=self.drafter.max_branches, early_stop=params.early_stop,
                                  draft_lag=lag, remaining=params.max_tokens,
                                  prompt_read=self.reads_ahead(params), draft_busy=reading.busy if reading else None)
            auto_opts = SSDOptions(k=k, backup=NGRAM, early_stop=params.early_stop)  # misses: the pool if it pays
            return AutoMode(steps, planner, auto_opts, lookup, greedy)
        opts = SSDOptions(k=k, fanout=params.fanout, geometric=params.geometric, backup=params.backup,
                          miss_limit=params.miss_limit, early_stop=params.early_stop, budget=budget)
        return SSDMode(steps, opts)
