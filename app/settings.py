"""App settings as a frozen dataclass that validates without I/O and maps onto engine parameters."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, fields, replace
from typing import Any

from engine import EngineConfig, GenerationParams, SamplingParams
from engine.engine import MAX_FANOUT, MAX_K, cpu_cores

MODES = ("auto", "ar", "sd", "ssd")  # the engine's modes, in the order the settings dialog offers them


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the settings dialog edits; :meth:`problems` lists invalid fields in plain words."""

    mode: str = "auto"
    k: int = 4
    adaptive: bool = True
    fanout: int = 2
    geometric: bool = False
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int = 0
    n_ctx: int = 4096
    max_tokens: int = 1024
    threads: int = 0
    draft_threads: int = 0
    gpu_layers: int = 0
    draft_gpu_layers: int = 0
    tint_drafts: bool = False

    def problems(self) -> dict[str, str]:
        """Map of field name to a one-line reason, empty when every value is usable."""
        out: dict[str, str] = {}
        if self.mode not in MODES:
            out["mode"] = f"mode must be one of {', '.join(MODES)}"
        if not 1 <= self.k <= MAX_K:
            out["k"] = f"draft length K must be between 1 and {MAX_K}"
        if not 0 <= self.fanout <= MAX_FANOUT:
            out["fanout"] = f"fan-out must be between 0 and {MAX_FANOUT}"
        if not 0.0 <= self.temperature <= 5.0:
            out["temperature"] = "temperature must be between 0 and 5 (0 = greedy)"
        if not 0.0 < self.top_p <= 1.0:
            out["top_p"] = "top-p must be above 0 and at most 1"
        if not 0 <= self.seed < 2**32:
            out["seed"] = "seed must be between 0 and 4294967295"
        if not 256 <= self.n_ctx <= 131072:
            out["n_ctx"] = "context length must be between 256 and 131072 tokens"
        if not 1 <= self.max_tokens <= self.n_ctx:
            out["max_tokens"] = "reply length must be between 1 and the context length"
        cores = cpu_cores()
        for name in ("threads", "draft_threads"):
            if not 0 <= getattr(self, name) <= cores:
                out[name] = f"threads must be between 0 (all cores) and {cores}"
        for name in ("gpu_layers", "draft_gpu_layers"):
            if not -1 <= getattr(self, name) <= 999:
                out[name] = "GPU layers must be between -1 (all) and 999"
        return out

    def with_values(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied (unknown names raise ``TypeError``)."""
        return replace(self, **changes)

    def engine_config(self, target: str, draft: str | None) -> EngineConfig:
        """The engine configuration for a model pair under these settings."""
        return EngineConfig(
            target, draft, n_ctx=self.n_ctx, threads=self.threads, draft_threads=self.draft_threads,
            gpu_layers=self.gpu_layers, draft_gpu_layers=self.draft_gpu_layers,
        )

    def generation_params(self, *, has_draft: bool, greedy: bool = False, mode: str | None = None,
                          max_tokens: int | None = None, seed_offset: int = 0) -> GenerationParams:
        """Generation parameters; ``greedy`` forces temperature 0 (used by "Verify exactness").

        ``seed_offset`` varies the sampler's seed so that Regenerate draws a different reply.
        """
        sampling = SamplingParams(temperature=0.0 if greedy else self.temperature,
                                  top_p=1.0 if greedy else self.top_p, seed=(self.seed + seed_offset) % 2**32)
        chosen = effective_mode(mode or self.mode, has_draft=has_draft)
        kwargs: dict[str, Any] = {
            "mode": chosen, "max_tokens": max_tokens or self.max_tokens, "sampling": sampling,
            "k": self.k, "fanout": self.fanout, "geometric": self.geometric,
        }
        if "adaptive" in _param_names():
            kwargs["adaptive"] = self.adaptive
        return GenerationParams(**kwargs)


def _param_names() -> set[str]:
    return {f.name for f in fields(GenerationParams)}


def auto_available() -> bool:
    """Whether this engine build has the ``auto`` strategy (``engine/auto.py``)."""
    return importlib.util.find_spec("engine.auto") is not None


def effective_mode(mode: str, *, has_draft: bool) -> str:
    """The mode actually run: ``ar`` without a draft, ``ssd`` for ``auto`` until the engine has it."""
    if not has_draft:
        return "ar"
    if mode == "auto" and not auto_available():
        return "ssd"
    return mode


def field_names() -> list[str]:
    """The settings' field names in declaration order."""
    return [f.name for f in fields(Settings)]
