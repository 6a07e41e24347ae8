"""The engine: a target and an optional draft model, and generation in any mode."""

from __future__ import annotations

import codecs
import contextlib
import logging
import threading
from collections.abc import Generator, Sequence

import numpy as np

from .batch.prefill import read_prompt
from .batch.promptcache import CacheUse, PromptCache
from .batch.rounds import SharedRounds
from .batch.slots import Slots
from .config import EngineConfig as EngineConfig
from .config import GenerationParams as GenerationParams
from .core import modelfile
from .core import options as opt
from .core.backend import Model
from .core.context import Context, ContextParams
from .core.mode import Mode
from .core.options import MAX_K, PREFILL_GRID, REMOTE_PREFILL_GRID, cpu_cores
from .core.placement import Placement, place_layers
from .core.recurrent import memory_kind
from .core.vocab import check_compatible
from .errors import ContextFullError, EngineError, ParameterError
from .generation import Generation, TokenEvent
from .modes import ModeMaker
from .prompts import Prompts
from .speculative import memory
from .speculative.auto import measured_rates
from .speculative.drafter import Drafter, PromptRead
from .speculative.knobs import K_MAX as AUTO_K_MAX
from .speculative.lookup import MAX_DRAFT as LOOKUP_MAX
from .speculative.lookup import Lookup
from .speculative.observer import RoundObserver, observer_for, tree_budget
from .speculative.plan import MeasuredRate
from .speculative.steps import Decoder, Threads
from .speculative.target import Target
from .speculative.types import RoundResult
from .stats import GenerationStats, StatsRecorder

log = logging.getLogger(__name__)

SLOT_WAIT_S = 5.0  # how long a reply waits for a sequence of the target context before it is refused
SHARED = "beside other replies"  # why a round is plain: the decode is shared


def wholly_on_gpu(placement: Placement) -> bool:
    return placement.target_total > 0 and placement.target_on_gpu >= placement.target_total


def replies_at_once(asked: int, placement: Placement) -> int:
    """The replies one engine makes at once: ``asked``, or for 0 the machine's default (options.PARALLEL)."""
    if asked:
        return asked
    return opt.AUTO_GPU_REPLIES if wholly_on_gpu(placement) else opt.AUTO_CPU_REPLIES


class Engine(Prompts, ModeMaker):
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
        self._active: Generation | None = None
        self._open: list[Generation] = []  # the replies started and not yet closed
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
        n_seq = replies_at_once(cfg.parallel, pl)
        target = Model(cfg.target_path, gpu_layers=pl.target_layers, remote=cfg.rpc, split=cfg.tensor_split)
        self.target_model = self._stack.enter_context(target)
        kind = memory_kind(self.target_model.ptr)
        if kind.recurrent and n_seq > 1:  # its checkpoints take the spare sequences
            log.info("%s keeps a recurrent state: one reply at a time", kind.arch)
            n_seq = 1
        n_ctx = min(cfg.n_ctx, max(self.target_model.n_ctx_train, 64)) if self.target_model.n_ctx_train else cfg.n_ctx
        self.target_ctx = self._stack.enter_context(
            Context(self.target_model, ContextParams(n_ctx=n_ctx * n_seq, n_batch=512, n_seq_max=n_seq,
                                                     n_threads=threads, n_threads_batch=threads,
                                                     flash_attn=cfg.flash_attn,
                                                     sampling=cfg.sampling_path if n_seq == 1 else "host"))
        )
        # a recurrent state is reused at its checkpoints instead
        grid = 0 if kind.recurrent else REMOTE_PREFILL_GRID if self.target_model.remote else PREFILL_GRID
        self._slots = Slots([Target(self.target_model, self.target_ctx, s, grid) for s in range(n_seq)])
        self._stack.callback(self._slots.close)
        self.prompt_cache = PromptCache(cfg.prompt_cache_mb)
        self.target = self._slots.targets[0]
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
        # on the CPU a shared decode stays within the rows a single token's kernels take (rounds.EXACT_ROWS)
        self._rounds = SharedRounds(self._slots, threads, exact=not wholly_on_gpu(pl))
        setup = f"threads {threads} {dthreads}, {pl.memory_key}"
        self._memory = memory.memory_file([cfg.target_path, cfg.draft_path], setup) if cfg.remember_machine else None
        # auto's measurements of this machine, kept across replies (and across starts, with remember_machine)
        self._cost_model = memory.load(self._memory, bool(split))
        self._lookup = Lookup(self._cost_model)  # the n-gram pool over the conversation (constant memory)
        self.n_ctx = self.target_ctx.n_ctx_seq  # what one reply's conversation may hold
        self.files = modelfile.ModelFiles([cfg.target_path, cfg.draft_path])  # size and mtime at load

    def close(self) -> None:
        """Free the models (any thread); a generation still running ends first, within one round."""
        self._active = None
        for gen in list(self._open):
            gen.close()
        self._slots.close()  # its decoding thread ends first: it never waits on the lock taken here
        with self._slots.lock:
            self._stack.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- prompts (tokenize, messages_tokens, chat_format...: engine.prompts) --------------------------
    def top2_margin(self, tokens: Sequence[int]) -> float:
        """The target's logit gap between its two best next tokens after ``tokens`` (near-tie check)."""
        target = self._slots.take(tokens, SLOT_WAIT_S)
        if target is None:
            raise EngineError(self._busy())
        try:
            row = self._slots.run(lambda: target.kv.sync(list(tokens)))
        finally:
            self._slots.give(target)
        top = np.partition(row, -2)[-2:]
        return float(top[1] - top[0])

    @property
    def replies_at_once(self) -> int:
        """How many replies this engine makes at the same time (more wait for a free one)."""
        return self._slots.size

    def slots(self) -> list[tuple[int, bool, bool]]:
        """Each reply sequence: (id, busy, in shared plain rounds)."""
        return self._slots.each()

    def _busy(self) -> str:
        if self._slots.size == 1:
            return "another generation is still running on this engine; stop it first"
        return f"all {self._slots.size} replies this engine makes at once are busy; try again when one ends"

    def measured_rates(self) -> dict[str, MeasuredRate]:
        """auto's best plan per mode it has run here, with its predicted tok/s (read between generations)."""
        return measured_rates(self._cost_model, max_branches=self.config.max_branches)

    def prompt_cache_use(self) -> CacheUse:
        with self._slots.lock:  # the cache changes only under the context's lock
            return self.prompt_cache.use()

    # -- generation -------------------------------------------------------------------------------
    def generate(
        self,
        prompt: Sequence[int],
        params: GenerationParams,
        stop: threading.Event | None = None,
    ) -> Generation:
        """Start a generation (iterate it for tokens); ``stop`` is checked between rounds and draft steps. With one
        reply at a time (:attr:`replies_at_once`), one still open is closed first, which takes at most the rest of
        its round; otherwise it waits for a free sequence."""
        self.files.check()  # ModelFileChangedError: a model file cut short under its mmap would SIGBUS on a read
        if params.mode.needs_draft and self.drafter is None:
            raise ParameterError(f"mode {params.mode!r} needs a draft model")
        if len(prompt) + 1 >= self.n_ctx:
            raise ContextFullError(
                f"the prompt has {len(prompt)} tokens but the context holds only {self.n_ctx}"
            )
        previous, self._active = self._active, None
        if previous is not None and self._slots.size == 1:
            previous.close()
        self._open = [g for g in self._open if g.stats.finish_reason == ""]
        stats = GenerationStats(mode=params.mode, prompt_tokens=len(prompt))
        tokens: list[int] = []
        halt = threading.Event()
        events = self._run(list(prompt), params, (stop or threading.Event(), halt), stats, tokens)
        self._active = Generation(events, stats, tokens, halt)
        self._open.append(self._active)
        return self._active

    def _run(
        self,
        prompt: list[int],
        params: GenerationParams,
        stops: tuple[threading.Event, threading.Event],
        stats: GenerationStats,
        tokens: list[int],
    ) -> Generator[TokenEvent, None, None]:
        target = self._slots.take(prompt, SLOT_WAIT_S)
        if target is None:
            raise EngineError(self._busy())
        model = self.target_model
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        recorder = StatsRecorder(stats)
        rng = np.random.default_rng([params.sampling.seed, 0])
        mode: Decoder | None = None
        observer: RoundObserver | None = None
        start = self._decode_times()
        ahead: PromptRead | None = None
        lone = self._slots.size == 1
        drafting = False  # whether the draft model is set for this reply (it is a reply's while no other runs)
        try:
            self._slots.run(lambda: self.prompt_cache.swap(target, prompt))
            if self._slots.alone():
                self._configure_drafter(params, stops, len(prompt))  # before its prompt read: the read owns it
                ahead, drafting = self._read_ahead(prompt, params), True
            if lone:  # None: stopped while reading the prompt
                first = target.start(prompt, params.sampling, rng, stops)
            else:
                first = read_prompt(self._slots, target, prompt, params.sampling, rng,
                                    lambda: any(e.is_set() for e in stops), self.threads.target)
            recorder.first_token(self._decode_times())
            stats.prompt_cached = len(prompt) - target.kv.synced if first is not None else 0
            pending: list[tuple[int, bool]] = [] if first is None else [(first, False)]
            stats.sampling_path = self._sampling_path(params, target.path)
            n_round = 0
            while True:
                for i, (tok, from_draft) in enumerate(pending, 1):
                    if model.is_eog(tok):
                        stats.finish_reason = "stop"
                        return
                    tokens.append(tok)
                    recorder.token()
                    text = decoder.decode(model.token_bytes(tok, special=tok in self._shown))
                    yield TokenEvent(tok, text, from_draft, n_round, i == len(pending))
                    if len(tokens) >= params.max_tokens:
                        stats.finish_reason = "length"
                        return
                if stops[0].is_set() or stops[1].is_set():
                    stats.finish_reason = "stopped"
                    return
                if len(target.committed) + max(params.k, AUTO_K_MAX, LOOKUP_MAX) + 2 > self.n_ctx:
                    stats.finish_reason = "context"
                    return
                if not lone and not self._slots.alone():  # another reply runs: plain rounds in shared decodes
                    if ahead is not None:
                        self._join_read(ahead, recorder)
                        ahead = None
                    if mode is not None:
                        mode.close()  # joins the draft thread: the draft model is free for the next reply alone
                        mode = None
                    drafting = False
                    self._slots.share(target, True)
                    verdict, seconds = self._rounds.ar(target)
                    rr = RoundResult([verdict.next_token], Mode.AR, verify_s=seconds, why=SHARED)
                else:
                    self._slots.share(target, False)
                    if mode is None:  # after the first token is out: the draft may still be reading the prompt
                        if not drafting:  # alone again: the draft model is this reply's
                            self._configure_drafter(params, stops, len(prompt))
                            drafting = True
                        # auto's rounds on ar need no draft: it waits for the read at its first drafting round
                        reading = ahead if params.mode is Mode.AUTO else None
                        if ahead is not None and reading is None:
                            self._join_read(ahead, recorder)
                            ahead = None
                        budget = tree_budget(self._cost_model, params) if params.mode is Mode.SSD else 0  # its tree
                        mode = self._make_mode(target, params, budget, reading, recorder)
                        if observer is None:
                            observer = observer_for(self._cost_model, params, budget, draft=self.drafter is not None)
                    rr = self._slots.run(mode.step)
                n_round += 1
                recorder.round(rr)
                if observer is not None and rr.why != SHARED:
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
                self._slots.give(target)
            recorder.finish(start, self._decode_times(),
                            draft_on_this_thread=params.mode.drafts_inline and self.drafter is not None)
