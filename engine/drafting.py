"""The engine's draft side between rounds: the draft's sampler for a reply, its prompt read, the decode clocks."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np

from .config import GenerationParams
from .core.context import Context
from .core.mode import Mode
from .speculative.drafter import Drafter, PromptRead
from .speculative.steps import Threads
from .stats import DecodeTimes, StatsRecorder


class DraftSide:
    """Mixin of :class:`~engine.engine.Engine`: what it does with the draft model around a reply's rounds."""

    drafter: Drafter | None
    target_ctx: Context
    threads: Threads

    def _configure_drafter(self, params: GenerationParams, stops: Sequence[threading.Event], n_prompt: int) -> None:
        """The draft's sampler for this reply (a mode that may draft with it): its settings, random numbers and
        the best ids kept per row (plain sd: the drafted token alone); a stop cuts its draft after the step."""
        if self.drafter is None or not params.mode.may_draft:
            return
        self.drafter.stop_when(*stops)
        top_count = 1 if params.mode is Mode.SD else max(params.fanout + 2, 6)
        self.drafter.configure(params.sampling, np.random.default_rng([params.sampling.seed, 1]),
                               top_count=top_count, prompt_len=n_prompt)

    def _join_read(self, ahead: PromptRead, recorder: StatsRecorder) -> None:
        """Wait for the draft's prompt read; the wait is the loop's (as a wait for a draft is)."""
        t0 = time.perf_counter()
        ahead.join()
        recorder.draft_free(self._decode_times(), time.perf_counter() - t0)

    def _read_ahead(self, prompt: Sequence[int], params: GenerationParams) -> PromptRead | None:
        """The draft reads the prompt beside the target where the two never share a core and the mode drafts."""
        if self.drafter is None or not self.reads_ahead(params):
            return None
        return PromptRead(self.drafter, prompt)

    def reads_ahead(self, params: GenerationParams) -> bool:
        """Whether the draft model reads the prompt on its own thread (:meth:`_read_ahead`)."""
        return self.drafter is not None and params.mode.may_draft and self.threads.split is None

    def _sampling_path(self, params: GenerationParams, target_path: str) -> str:
        """host or backend (engine.core.outputs); "target/draft" when the two differ."""
        t = d = target_path
        if self.drafter is not None and params.mode.may_draft:
            d = self.drafter.ctx.sampling_path(params.sampling)  # what its configure() picks
        return t if d == t else f"{t}/{d}"

    def _decode_times(self) -> DecodeTimes:
        t, d = self.target_ctx, self.drafter.ctx if self.drafter else None
        return DecodeTimes(t.decode_seconds, d.decode_seconds if d else 0.0, t.decode_cpu_seconds,
                           d.decode_cpu_seconds if d else 0.0)
