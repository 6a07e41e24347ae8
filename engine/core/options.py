"""Every user-facing setting declared once: name, type, bounds, default, label and help.

The engine's parameter classes validate against these declarations, and the app's settings
dialog and settings store read them, so a bound or a default is written in one place only.
``default`` is what the engine uses when nothing is given (the command line, the bench);
``chat_default``, where set, is the desktop chat's starting value (sampled replies, longer ones).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from engine.errors import ParameterError

from .mode import MODES as MODES
from .mode import Mode

Value = TypeVar("Value", int, float, bool, str)


def cpu_cores() -> int:
    """Cores usable by this process."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


@dataclass(frozen=True, slots=True)
class Option(Generic[Value]):
    """One setting. ``problem`` says in one line why a value is unusable; ``check`` raises it."""

    name: str
    kind: type[Value]
    default: Value
    label: str
    help: str
    group: str  # "decoding", "sampling" or "hardware"
    minimum: Value | None = None
    maximum: Value | None = None
    above_minimum: bool = False  # the minimum itself is excluded
    below_maximum: bool = False  # the maximum itself is excluded
    choices: tuple[Value, ...] = ()
    note: str = ""  # what a special value means, e.g. "0 = all cores"
    chat_default: Value | None = None

    @property
    def noun(self) -> str:
        """The label as it reads inside a sentence ("Top-p" -> "top-p", "CPU threads" unchanged)."""
        text = self.label
        return text if len(text) > 1 and text[1].isupper() else text[:1].lower() + text[1:]

    @property
    def app_default(self) -> Value:
        return self.default if self.chat_default is None else self.chat_default

    def bounds_text(self) -> str:
        lo, hi = _fmt(self.minimum), _fmt(self.maximum)
        if self.choices:
            text = "one of " + ", ".join(str(c) for c in self.choices)
        elif self.minimum is None or self.maximum is None:
            text = _KIND_WORDS[self.kind]
        elif self.above_minimum:
            text = f"above {lo} and at most {hi}"
        elif self.below_maximum:
            text = f"at least {lo} and below {hi}"
        else:
            text = f"between {lo} and {hi}"
        return f"{text} ({self.note})" if self.note else text

    def problem(self, value: object) -> str | None:
        """None when ``value`` is usable, else a plain sentence naming the setting and its bounds."""
        if not self._right_type(value):
            return f"{self.noun} must be {_KIND_WORDS[self.kind]}, got {value!r}"
        if isinstance(value, float) and not math.isfinite(value):  # NaN passes every comparison with a bound
            return f"{self.noun} must be a finite number, got {value!r}"
        if self.choices:
            return None if value in self.choices else f"{self.noun} must be {self.bounds_text()}, got {value!r}"
        if self.minimum is None or self.maximum is None:
            return None
        x, lo, hi = _number(value), _number(self.minimum), _number(self.maximum)
        too_low = x <= lo if self.above_minimum else x < lo
        too_high = x >= hi if self.below_maximum else x > hi
        return f"{self.noun} must be {self.bounds_text()}, got {_fmt(value)}" if too_low or too_high else None

    def check(self, value: object) -> None:
        problem = self.problem(value)
        if problem is not None:
            raise ParameterError(problem)

    def parse(self, text: str) -> Value:
        """The value typed as ``text`` (a dialog field, an ini entry); ParameterError if it is not one."""
        text = text.strip()
        try:
            if self.kind is bool:
                if text.lower() not in _BOOL_WORDS:
                    raise ValueError(text)
                return self.kind(_BOOL_WORDS[text.lower()])
            return self.kind(text)
        except ValueError:
            raise ParameterError(f"{self.noun}: enter {_KIND_WORDS[self.kind]}") from None

    def _right_type(self, value: object) -> bool:
        if self.kind is bool:
            return isinstance(value, bool)
        if isinstance(value, bool):
            return False
        if self.kind is float:
            return isinstance(value, int | float)
        return isinstance(value, self.kind)


_KIND_WORDS: dict[type, str] = {int: "a whole number", float: "a number", bool: "true or false", str: "a word"}
_BOOL_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _number(value: object) -> float:
    assert isinstance(value, int | float), value  # bounds exist on numeric settings only
    return float(value)


def _fmt(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


MAX_K = 16
MAX_FANOUT = 16
MAX_BRANCHES = 48
MAX_CONTEXT = 1 << 20
MAX_PARALLEL = 8  # sequences one context batches: past that a CPU decode is compute-bound and a GPU user runs a server
# A prompt is read in chunks of this many positions from a multiple of it, so that every read of a position is the
# same batch shape (llama.cpp's rows depend on it); small enough that a reused prompt reads again at most this much.
PREFILL_GRID = 64
REMOTE_PREFILL_GRID = 512  # over RPC every chunk costs round trips: a remote target reads whole batches

# -- decoding ---------------------------------------------------------------------------------------
MODE = Option("mode", str, Mode.AUTO.value, "Mode", "ar: target only; sd: speculative decoding; ssd: speculative "
              "speculative decoding; lookup: drafts from an n-gram pool over the conversation (no draft "
              "model); auto: picks the fastest as it goes", "decoding",
              choices=MODES)
K = Option("k", int, 4, "Draft length K", "Draft tokens per round (auto's fixed K when not adaptive)",
           "decoding", 1, MAX_K)
ADAPTIVE = Option("adaptive", bool, True, "Adaptive draft length", "auto chooses K every round", "decoding")
FANOUT = Option("fanout", int, 2, "Fan-out", "Pre-speculated candidates per outcome position (ssd's tree)",
                "decoding", 0, MAX_FANOUT)
GEOMETRIC = Option("geometric", bool, False, "Geometric fan-out",
                   "Spread the tree's branches geometrically over the likely outcomes (Saguaro)", "decoding")
BUDGET = Option("budget", int, 0, "Tree budget", "ssd tree branches per round", "decoding", 0, MAX_BRANCHES,
                note="0 = fan-out x (K + 1), cut to the tree that pays on this machine once it is measured")
BACKUP = Option("backup", str, "jit", "Backup speculator", "What drafts on a cache miss: the draft model (jit) "
                "or the n-gram pool when its draft pays, else the draft model (ngram)", "decoding",
                choices=("jit", "ngram"))
MISS_LIMIT = Option("miss_limit", int, 3, "Miss limit", "Consecutive cache misses before ssd rolls back to sd",
                    "decoding", 1, 64)
EARLY_STOP = Option("early_stop", bool, True, "Early stop",
                    "Serve a shallower branch rather than wait for the whole tree", "decoding")

# -- sampling ---------------------------------------------------------------------------------------
# Sampled defaults follow llama.cpp and Ollama (top-k 40, top-p 0.95, min-p 0.05, temperature 0.8): the
# common case is then the fast one (a top-k the backend sampler runs; top-k 0 is exact on the host path).
TEMPERATURE = Option("temperature", float, 0.0, "Temperature", "0 is greedy: the same reply every time",
                     "sampling", 0.0, 5.0, note="0 = greedy", chat_default=0.8)
TOP_K = Option("top_k", int, 40, "Top-k", "Sample among the k likeliest tokens only", "sampling", 0, 1 << 20,
               note="0 = off: the whole vocabulary (slower)")
TOP_P = Option("top_p", float, 0.95, "Top-p", "Sample among the likeliest tokens that hold this much probability",
               "sampling", 0.0, 1.0, above_minimum=True)
MIN_P = Option("min_p", float, 0.05, "Min-p", "Drop tokens less likely than this share of the best one",
               "sampling", 0.0, 1.0, below_maximum=True, note="0 = off")
SEED = Option("seed", int, 0, "Seed", "Seed of the sampler's random numbers: under the coupled scheme one seed "
              "gives one reply in every mode", "sampling", 0, 2**32 - 1, note="in the app, 0 = a fresh seed for "
              "every reply")
# coupled: position-keyed Gumbel noise, drafts verified by comparison (engine.core.gumbel); rejection: standard
# speculative sampling. The default is coupled: its acceptance is within the noise of rejection's on the real pair
# (docs/benchmarks.md, "coupled against rejection sampling"), and only its seeded reply repeats in every mode.
SCHEME = Option("scheme", str, "coupled", "Sampling scheme", "coupled: one seed gives the same reply in every "
                "mode (drafts are judged by comparison under shared noise); rejection: standard speculative "
                "sampling (accept with probability min(1, p/q))", "sampling", choices=("coupled", "rejection"))
MAX_TOKENS = Option("max_tokens", int, 256, "Max tokens", "The longest reply, in tokens", "sampling",
                    1, MAX_CONTEXT, chat_default=1024)

# -- hardware ---------------------------------------------------------------------------------------
N_CTX = Option("n_ctx", int, 4096, "Context length", "Tokens the conversation may hold (capped at the "
               "model's training length)", "hardware", 64, MAX_CONTEXT)
THREADS = Option("threads", int, 0, "Target CPU threads", "CPU threads the target model uses", "hardware",
                 0, cpu_cores(), note="0 = all cores")
DRAFT_THREADS = Option("draft_threads", int, 0, "Draft CPU threads", "CPU threads the draft model uses",
                       "hardware", 0, cpu_cores(), note="0 = all cores")
# GPU layers: a count, or one of these (llama.cpp itself takes -1 as all; auto is resolved before a load)
AUTO_LAYERS = -2  # every layer that fits in free GPU memory, the target's first (engine.core.placement)
ALL_LAYERS = -1
_LAYERS_NOTE = "-2 = auto: all that fit in free GPU memory, target first; -1 = all; 0 = none"
GPU_LAYERS = Option("gpu_layers", int, AUTO_LAYERS, "Target GPU layers", "Target layers offloaded to the GPU",
                    "hardware", AUTO_LAYERS, 999, note=_LAYERS_NOTE)
DRAFT_GPU_LAYERS = Option("draft_gpu_layers", int, AUTO_LAYERS, "Draft GPU layers",
                          "Draft layers offloaded to the GPU", "hardware", AUTO_LAYERS, 999, note=_LAYERS_NOTE)
BRANCHES = Option("max_branches", int, 32, "Max branches",
                          "Speculation-tree sequences the draft context is sized for", "hardware", 1, MAX_BRANCHES)
FLASH_ATTN = Option("flash_attn", bool, True, "Flash attention", "Use llama.cpp's flash attention", "hardware")
# Auto replies at once: a GPU decode of a few rows costs about one row's; on a CPU a second row is already
# dearer, but two keep a chat from waiting behind another client's long reply.
AUTO_GPU_REPLIES, AUTO_CPU_REPLIES = 4, 2
# The engine alone makes one reply at a time (scripts, tests); the app and serve ask for the machine's default.
PARALLEL = Option("parallel", int, 1, "Replies at once", "Replies the engine makes at the same time (more wait "
                  "their turn); beside another reply each is made without speculation", "hardware", 0,
                  MAX_PARALLEL, note="0 = auto: 4 with the target on a GPU, 2 on a CPU", chat_default=0)

# A 1,000-token conversation of a 1.5B model holds about 28 MB: this keeps several, and is small beside the model.
PROMPT_CACHE = Option("prompt_cache_mb", int, 256, "Prompt cache (MB)", "Host memory that keeps recent "
                      "conversations' prompts, so that going back to one does not read it again", "hardware", 0,
                      1 << 16, note="0 = off")

OPTIONS: dict[str, Option[Any]] = {o.name: o for o in (
    MODE, K, ADAPTIVE, FANOUT, GEOMETRIC, BUDGET, BACKUP, MISS_LIMIT, EARLY_STOP,
    TEMPERATURE, TOP_K, TOP_P, MIN_P, SEED, SCHEME, MAX_TOKENS,
    N_CTX, THREADS, DRAFT_THREADS, GPU_LAYERS, DRAFT_GPU_LAYERS, BRANCHES, FLASH_ATTN, PARALLEL, PROMPT_CACHE,
)}


def check_fields(obj: object, names: Iterable[str]) -> None:
    """Raise :class:`ParameterError` for the first of ``names`` whose value on ``obj`` is out of bounds."""
    for name in names:
        OPTIONS[name].check(getattr(obj, name))
