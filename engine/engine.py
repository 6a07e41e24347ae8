"""The engine: a target and an optional draft model, and generation in any mode."""

from __future__ import annotations

import codecs
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Generator, Sequence

import numpy as np

from .config import EngineConfig as EngineConfig
from .config import GenerationParams as GenerationParams
from .core import modelfile
from .core.backend import Model
from .core.context import Context, ContextParams
from .core.options import MAX_K, cpu_cores
from .core.placement import place_layers
from .core.vocab import check_compatible
from .errors import ContextFullError, EngineError, ParameterError
from .generation import Generation, TokenEvent
from .prompts import Prompts
from .speculative import memory
from .speculative.auto import AutoMode, measured_rates
from .speculative.drafter import Drafter, PromptRead
from .speculative.knobs import K_MAX as AUTO_K_MAX
from .speculative.lookup import MAX_DRAFT as LOOKUP_MAX
from .speculative.lookup import Lookup, LookupMode
from .speculative.observer import RoundObserver, observer_for, tree_budget
from .speculative.plan import MeasuredRate
from .speculative.planner import AutoPlanner
from .speculative.ssd import SSDMode, SSDOptions
from .speculative.steps import ARMode, Mode, SDMode, Steps, Threads
from .speculative.target import Target
from .speculative.types import NGRAM
from .speculative.worker import DraftWorker, InlineDrafts, SplitDrafts
from .stats import DecodeTimes, GenerationStats, StatsRecorder

log = logging.getLogger(__name__)

DRAFT_FREE_MODES = ("ar", "lookup", "auto")  # modes that run on a target alone
MODEL_DRAFT_MODES = ("sd", "ssd", "auto")  # modes that may draft with the draft model
INLINE_DRAFT_MODES = ("sd",)  # modes whose draft decodes run on the generating thread (counted as the loop's)


class Engine(Prompts):
    """Loads a target and optionally a draft, and generates in any mode (``lookup`` and ``auto`` also without one).

    Example:
        >>> with Engine(EngineConfig("target.gguf", "draft.gguf")) as eng:
        ...     gen = eng.generate(eng.chat_tokens("Hello"), GenerationParams(mode="ssd")).run()
    """

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self._stack = contextlib.ExitStack()
        self.draft_model: Model | None = None
        self.drafter: Drafter | None = None
        self._lock = threading.Lock()
        self._active: Generation | None = None
        try:
            self._load()
        except BaseException:
            self._stack.close()
            raise

    def _load(self) -> None:
        cfg = self.config
        cores = cpu_cores()
        threads, dthreads = cfg.threads or cores, cfg.draft_threads or cores
        # GPU layers for both models at once (auto: all that fit in free GPU memory, the target's first)
        pl = self.placement = place_layers(cfg.target_path, cfg.draft_path, cfg.gpu_layers, cfg.draft_gpu_layers,
                                           cfg.n_ctx, remote=cfg.rpc)
        target = Model(cfg.target_path, gpu_layers=pl.target_layers, remote=cfg.rpc, split=cfg.tensor_split)
        self.target_model = self._stack.enter_context(target)
        n_ctx = min(cfg.n_ctx, max(self.target_model.n_ctx_train, 64)) if self.target_model.n_ctx_train else cfg.n_ctx
        self.target_ctx = self._stack.enter_context(
            Context(self.target_model, ContextParams(n_ctx=n_ctx, n_batch=512, n_threads=threads,
                                                     n_threads_batch=threads, flash_attn=cfg.flash_attn,
                                                     sampling=cfg.sampling_path))
        )
        self.target = Target(self.target_model, self.target_ctx)
        if cfg.draft_path:
            self.draft_model = self._stack.enter_context(Model(cfg.draft_path, gpu_layers=pl.draft_layers))
            check_compatible(self.target_model, self.draft_model)
            extra = MAX_K * (cfg.max_branches + 1) + 16
            dctx = self._stack.enter_context(
                Context(self.draft_model, ContextParams(
                    n_ctx=n_ctx + extra, n_batch=512, n_seq_max=cfg.max_branches + 1, kv_unified=True,
                    n_threads=dthreads, n_threads_batch=dthreads, flash_attn=cfg.flash_attn,
                    sampling=cfg.sampling_path))
            )
            self.drafter = Drafter(dctx, self.draft_model.is_eog, cfg.max_branches)
        # the family's turn ends end a reply; its thinking and call markers stay in the reply's text
        self._shown = self._chat_markers([m for m in (self.target_model, self.draft_model) if m is not None])
        split = None
        if not pl.target_on_gpu and not pl.draft_on_gpu and threads + dthreads > cores:
            d = max(1, cores // 4)
            split = (max(1, cores - d), d)
        self.threads = Threads(threads, dthreads, split)
        setup = f"threads {threads} {dthreads}, {pl.memory_key}"
        self._memory = memory.memory_file([cfg.target_path, cfg.draft_path], setup) if cfg.remember_machine else None
        # auto's measurements of this machine, kept across replies (and across starts, with remember_machine)
        self._cost_model = memory.load(self._memory, bool(split))
        self._lookup = Lookup(self._cost_model)  # the n-gram pool over the conversation (constant memory)
        self.n_ctx = self.target_ctx.n_ctx
        self.files = modelfile.ModelFiles([cfg.target_path, cfg.draft_path])  # size and mtime at load

    def close(self) -> None:
        """Free the models (any thread); a generation still running ends first, within one round."""
        active, self._active = self._active, None
        if active is not None:
            active.close()
        with self._lock:
            self._stack.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- prompts (tokenize, messages_tokens, chat_format...: engine.prompts) --------------------------
    def top2_margin(self, tokens: Sequence[int]) -> float:
        """The target's logit gap between its two best next tokens after ``tokens`` (near-tie check)."""
        with self._lock:
            row = self.target.kv.sync(list(tokens))
        top = np.partition(row, -2)[-2:]
        return float(top[1] - top[0])

    def measured_rates(self) -> dict[str, MeasuredRate]:
        """auto's best plan per mode it has run here, with its predicted tok/s (read between generations)."""
        return measured_rates(self._cost_model, max_branches=self.config.max_branches)

    # -- generation -------------------------------------------------------------------------------
    def generate(
        self,
        prompt: Sequence[int],
        params: GenerationParams,
        stop: threading.Event | None = None,
    ) -> Generation:
        """Start a generation (iterate it for tokens); ``stop`` is checked between rounds and draft steps. One
        generation runs at a time: one still open is closed first, which takes at most the rest of its round."""
        self.files.check()  # ModelFileChangedError: a model file cut short under its mmap would SIGBUS on a read
        if params.mode not in DRAFT_FREE_MODES and self.drafter is None:
            raise ParameterError(f"mode {params.mode!r} needs a draft model")
        if len(prompt) + 1 >= self.n_ctx:
            raise ContextFullError(
                f"the prompt has {len(prompt)} tokens but the context holds only {self.n_ctx}"
            )
        previous, self._active = self._active, None
        if previous is not None:
            previous.close()
        stats = GenerationStats(mode=params.mode, prompt_tokens=len(prompt))
        tokens: list[int] = []
        halt = threading.Event()
        events = self._run(list(prompt), params, (stop or threading.Event(), halt), stats, tokens)
        self._active = Generation(events, stats, tokens, halt)
        return self._active

    def _make_mode(self, params: GenerationParams, budget: int, reading: PromptRead | None = None,
                   recorder: StatsRecorder | None = None) -> Mode:
        """The reply's mode; ``budget``: fixed ssd's tree (observer.tree_budget). auto may start while the draft
        still reads the prompt (``reading``): its drafter waits for it at first use (the wait: ``recorder``)."""
        if params.mode == "ar":
            return ARMode(Steps(self.target, None))
        k = params.k
        greedy = params.sampling.greedy
        lookup = self._lookup
        lookup.start(self.target.committed)
        if params.mode == "lookup":
            return LookupMode(Steps(self.target, None, self.threads), lookup, greedy=greedy)
        if self.drafter is None:  # auto on a target alone: ar, and the pool's drafts when they pay
            planner = AutoPlanner(self._cost_model, k, draft=False)
            return AutoMode(Steps(self.target, None, self.threads), planner, SSDOptions(k=k), lookup, greedy)
        self.drafter.pool_draft = lambda committed, n: lookup.propose(committed, n, greedy=greedy,
                                                                                 shadow=False)
        if params.mode == "sd":
            return SDMode(Steps(self.target, InlineDrafts(self.drafter)), k)  # the draft runs on this thread
        ready = functools.partial(self._join_read, reading, recorder) if reading and recorder else None
        drafts = SplitDrafts(self.drafter, ready) if params.mode == "auto" else DraftWorker(self.drafter)
        steps = Steps(self.target, drafts, self.threads)
        if params.mode == "auto":
            # read before the draft thread starts (during a prompt read: what the read will have left; a read that
            # fails leaves the whole context to the first drafting round, which then catches up, unpriced)
            lag = reading.lag(self.target.committed) if reading else self.drafter.lag(self.target.committed)
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

    def _run(
        self,
        prompt: list[int],
        params: GenerationParams,
        stops: tuple[threading.Event, threading.Event],
        stats: GenerationStats,
        tokens: list[int],
    ) -> Generator[TokenEvent, None, None]:
        if not self._lock.acquire(timeout=5.0):
            raise EngineError("another generation is still running on this engine; stop it first")
        model = self.target_model
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        recorder = StatsRecorder(stats)
        rng = np.random.default_rng([params.sampling.seed, 0])
        mode: Mode | None = None
        observer: RoundObserver | None = None
        start = self._decode_times()
        ahead: PromptRead | None = None
        try:
            self._configure_drafter(params, stops, len(prompt))  # before its prompt read: the read owns the drafter
            ahead = self._read_ahead(prompt, params)
            first = self.target.start(prompt, params.sampling, rng, stops)  # None: stopped while reading the prompt
            recorder.first_token(self._decode_times())
            stats.prompt_cached = len(prompt) - self.target.kv.synced if first is not None else 0
            pending: list[tuple[int, bool]] = [] if first is None else [(first, False)]
            stats.sampling_path = self._sampling_path(params)
            n_round = 0
            while True:
                for tok, from_draft in pending:
                    if model.is_eog(tok):
                        stats.finish_reason = "stop"
                        return
                    tokens.append(tok)
                    recorder.token()
                    text = decoder.decode(model.token_bytes(tok, special=tok in self._shown))
                    yield TokenEvent(tok, text, from_draft, n_round)
                    if len(tokens) >= params.max_tokens:
                        stats.finish_reason = "length"
                        return
                if stops[0].is_set() or stops[1].is_set():
                    stats.finish_reason = "stopped"
                    return
                if len(self.target.committed) + max(params.k, AUTO_K_MAX, LOOKUP_MAX) + 2 > self.n_ctx:
                    stats.finish_reason = "context"
                    return
                if mode is None:  # after the first token is out: the draft may still be reading the prompt
                    # auto's rounds on ar need no draft: it waits for the read at its first drafting round
                    reading = ahead if params.mode == "auto" else None
                    if ahead is not None and reading is None:
                        self._join_read(ahead, recorder)
                        ahead = None
                    budget = tree_budget(self._cost_model, params) if params.mode == "ssd" else 0  # fixed ssd's tree
                    mode = self._make_mode(params, budget, reading, recorder)
                    observer = observer_for(self._cost_model, params, budget, draft=self.drafter is not None)
                rr = mode.step()
                n_round += 1
                recorder.round(rr)
                if observer is not None:
                    observer.round(rr)
                pending = [(t, i < rr.accepted) for i, t in enumerate(rr.tokens)]
        finally:
            try:
                try:
                    if ahead is not None:
                        self._join_read(ahead, recorder)  # the draft context is never left to a thread
                finally:
                    if mode is not None:
                        mode.close()  # joins the draft thread
                if observer is not None:
                    observer.finish()  # before the next generation can read the cost model
                if self._memory is not None:
                    memory.save(self._cost_model, self._memory)
            finally:
                self._lock.release()
            recorder.finish(start, self._decode_times(),
                            draft_on_this_thread=params.mode in INLINE_DRAFT_MODES and self.drafter is not None)

    def _configure_drafter(self, params: GenerationParams, stops: tuple[threading.Event, ...], n_prompt: int) -> None:
        """The draft's sampler for this reply (a mode that may draft with it): its settings, random numbers and
        the best ids kept per row (plain sd: the drafted token alone); a stop cuts its draft after the step."""
        if self.drafter is None or params.mode not in MODEL_DRAFT_MODES:
            return
        self.drafter.stop_when(*stops)
        self.drafter.configure(params.sampling, np.random.default_rng([params.sampling.seed, 1]),
                               top_count=1 if params.mode == "sd" else max(params.fanout + 2, 6), prompt_len=n_prompt)

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
        return self.drafter is not None and params.mode in MODEL_DRAFT_MODES and self.threads.split is None

    def _sampling_path(self, params: GenerationParams) -> str:
        """host or backend (engine.core.outputs); "target/draft" when the two differ."""
        t = d = self.target.path
        if self.drafter is not None and params.mode in MODEL_DRAFT_MODES:
            d = self.drafter.ctx.sampling_path(params.sampling)  # what its configure() picks
        return t if d == t else f"{t}/{d}"

    def _decode_times(self) -> DecodeTimes:
        t, d = self.target_ctx, self.drafter.ctx if self.drafter else None
        return DecodeTimes(t.decode_seconds, d.decode_seconds if d else 0.0, t.decode_cpu_seconds,
                           d.decode_cpu_seconds if d else 0.0)
