"""What the engine is asked for: which models and how to run them (EngineConfig), and one generation's settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from .core import options as opt
from .core.mode import Mode
from .core.sampling import SamplingParams

CONFIG_FIELDS = ("n_ctx", "threads", "draft_threads", "gpu_layers", "draft_gpu_layers", "max_branches", "flash_attn",
                 "parallel", "prompt_cache_mb")
GENERATION_FIELDS = ("mode", "max_tokens", "k", "fanout", "geometric", "backup", "miss_limit", "early_stop",
                     "adaptive", "budget")


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Which models to load and how to run them (bounds and defaults: :mod:`engine.options`)."""

    target_path: str
    draft_path: str | None = None
    n_ctx: int = opt.N_CTX.default
    threads: int = opt.THREADS.default  # 0: all cores
    draft_threads: int = opt.DRAFT_THREADS.default  # 0: all cores
    gpu_layers: int = opt.GPU_LAYERS.default
    draft_gpu_layers: int = opt.DRAFT_GPU_LAYERS.default
    max_branches: int = opt.BRANCHES.default
    flash_attn: bool = opt.FLASH_ATTN.default
    parallel: int = opt.PARALLEL.default  # replies at once; 0: the machine's default (what serve and the app ask)
    prompt_cache_mb: int = opt.PROMPT_CACHE.default
    sampling_path: str = "auto"  # where rounds sample: auto (llama.cpp's chain on a GPU), host or backend
    remember_machine: bool = False  # keep auto's measurements on disk for the next start (engine.speculative.memory)
    rpc: tuple[str, ...] = ()  # HOST:PORT of remote machines (llama.cpp RPC servers) that run the target's layers
    tensor_split: tuple[float, ...] = ()  # each remote device's share of those layers (empty: by free memory)

    def __post_init__(self) -> None:
        opt.check_fields(self, CONFIG_FIELDS)


@dataclass(frozen=True, slots=True)
class GenerationParams:
    """One generation: mode, length, sampler and speculation settings (see :mod:`engine.options`)."""

    mode: Mode = Mode.AUTO  # a mode's word ("sd") is taken too
    max_tokens: int = opt.MAX_TOKENS.default
    sampling: SamplingParams = field(default_factory=SamplingParams)
    k: int = opt.K.default
    fanout: int = opt.FANOUT.default
    geometric: bool = opt.GEOMETRIC.default
    backup: str = opt.BACKUP.default
    miss_limit: int = opt.MISS_LIMIT.default
    early_stop: bool = opt.EARLY_STOP.default
    adaptive: bool = opt.ADAPTIVE.default  # auto: choose K per round (dynamic draft length)
    budget: int = opt.BUDGET.default  # ssd tree branches per round (0: fan-out x (K + 1), cut to what fits here)

    def __post_init__(self) -> None:
        opt.check_fields(self, GENERATION_FIELDS)
        object.__setattr__(self, "mode", Mode(self.mode))
