"""App settings as a frozen dataclass that validates without I/O and maps onto engine parameters.

Bounds, defaults, labels and help come from the engine's declarations (``engine.OPTIONS``); the
app adds only what is its own (the draft tint) and the one rule across two settings (a reply
must fit in the context).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, fields, replace
from typing import Any

from app.settings import remote
from engine import (
    DROP_OLDEST,
    OPTIONS,
    OVERFLOW_POLICIES,
    EngineConfig,
    GenerationParams,
    Mode,
    Option,
    SamplingParams,
    remote_endpoints,
)

TINT_DRAFTS = Option("tint_drafts", bool, False, "Tint drafts", "Tint text that came from accepted drafts", "view")
CONTEXT_OVERFLOW = Option(
    "context_overflow", str, DROP_OLDEST, "When the chat outgrows the context",
    "What a send does when the conversation no longer fits the context: leave out its oldest turns (the system"
    " prompt stays, and the reply says how many were left out), or stop and say so", "decoding",
    choices=OVERFLOW_POLICIES)
THINKING = Option(
    "thinking", str, "default", "Thinking",
    "Whether a model that can think first (Qwen3, DeepSeek R1, GPT-OSS...) does so before it answers: as its"
    " template does by default, or switched on or off where its template has the switch", "decoding",
    choices=("default", "on", "off"))
APP_OPTIONS: dict[str, Option[Any]] = {o.name: o for o in (TINT_DRAFTS, CONTEXT_OVERFLOW, THINKING, remote.REMOTE)}


def _default(name: str) -> Any:
    return OPTIONS[name].app_default


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the settings dialog edits; :meth:`problems` lists invalid fields in plain words."""

    mode: str = _default("mode")
    k: int = _default("k")
    adaptive: bool = _default("adaptive")
    fanout: int = _default("fanout")
    geometric: bool = _default("geometric")
    temperature: float = _default("temperature")
    top_k: int = _default("top_k")
    top_p: float = _default("top_p")
    min_p: float = _default("min_p")
    seed: int = _default("seed")  # 0: a fresh seed for every reply
    scheme: str = _default("scheme")
    max_tokens: int = _default("max_tokens")
    n_ctx: int = _default("n_ctx")
    threads: int = _default("threads")
    draft_threads: int = _default("draft_threads")
    gpu_layers: int = _default("gpu_layers")
    draft_gpu_layers: int = _default("draft_gpu_layers")
    parallel: int = _default("parallel")  # 0: the machine's default
    prompt_cache_mb: int = _default("prompt_cache_mb")
    tint_drafts: bool = TINT_DRAFTS.default
    context_overflow: str = CONTEXT_OVERFLOW.default
    thinking: str = THINKING.default  # "default", "on" or "off" (where the model's template has the switch)
    rpc: str = remote.REMOTE.default  # remote machines (HOST:PORT, comma-separated) for the target's layers

    def problems(self) -> dict[str, str]:
        """Map of field name to a one-line reason, empty when every value is usable."""
        out: dict[str, str] = {}
        for name, option in setting_options().items():
            problem = option.problem(getattr(self, name))
            if problem is not None:
                out[name] = problem
        if "max_tokens" not in out and "n_ctx" not in out and self.max_tokens > self.n_ctx:
            out["max_tokens"] = (f"{OPTIONS['max_tokens'].noun} must be at most the context length"
                                 f" ({self.n_ctx}), got {self.max_tokens}")
        if (why := remote.problem(self.rpc)) is not None:
            out["rpc"] = why
        return out

    def with_values(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied (unknown names raise ``TypeError``)."""
        return replace(self, **changes)

    def engine_config(self, target: str, draft: str | None) -> EngineConfig:
        """The engine configuration for a model pair under these settings."""
        return EngineConfig(
            target, draft, n_ctx=self.n_ctx, threads=self.threads, draft_threads=self.draft_threads,
            gpu_layers=self.gpu_layers, draft_gpu_layers=self.draft_gpu_layers, parallel=self.parallel,
            prompt_cache_mb=self.prompt_cache_mb, remember_machine=True,
            rpc=remote_endpoints(self.rpc),
        )

    def generation_params(self, *, has_draft: bool, greedy: bool = False, mode: str | None = None,
                          max_tokens: int | None = None, seed_offset: int = 0) -> GenerationParams:
        """Generation parameters; ``greedy`` forces temperature 0.

        A seed set here gives its reply in every mode (coupled scheme); ``seed_offset`` moves it so that Regenerate
        draws a different reply. Seed 0 draws a fresh seed for every call, so every reply differs.
        """
        seed = (self.seed + seed_offset) % 2**32 if self.seed else secrets.randbelow(2**32)
        sampling = SamplingParams(temperature=0.0 if greedy else self.temperature, top_k=self.top_k,
                                  top_p=1.0 if greedy else self.top_p, min_p=self.min_p, seed=seed,
                                  scheme=self.scheme)
        return GenerationParams(
            mode=Mode(effective_mode(mode or self.mode, has_draft=has_draft)), max_tokens=max_tokens or self.max_tokens,
            sampling=sampling, k=self.k, fanout=self.fanout, geometric=self.geometric, adaptive=self.adaptive)


def setting_options() -> dict[str, Option[Any]]:
    """The declaration of every field of :class:`Settings`, in field order."""
    known = {**OPTIONS, **APP_OPTIONS}
    return {f.name: known[f.name] for f in fields(Settings)}


def effective_mode(mode: str, *, has_draft: bool) -> str:
    """The mode actually run: ``mode``, or ``ar`` where it needs a draft the pair lacks (``lookup`` and
    ``auto`` run on a target alone)."""
    return mode if has_draft or not Mode(mode).needs_draft else Mode.AR


LOAD_GROUPS = ("hardware", "remote")  # Settings' sections whose fields the model reads when it loads


def load_fields() -> list[str]:
    """The settings read when a model loads (Hardware and Remote machines): changing one reloads the pair."""
    return [name for name, option in setting_options().items() if option.group in LOAD_GROUPS]
