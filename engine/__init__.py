"""ssd-chat's engine: llama.cpp decoding with ar, sd and ssd strategies. Never imports Qt."""

from .engine import Engine, EngineConfig, GenerationParams, GenerationStats, TokenEvent
from .errors import ContextFullError, EngineError, ModelLoadError, ParameterError, VocabMismatchError
from .sampling import SamplingParams

__all__ = [
    "ContextFullError",
    "Engine",
    "EngineConfig",
    "EngineError",
    "GenerationParams",
    "GenerationStats",
    "ModelLoadError",
    "ParameterError",
    "SamplingParams",
    "TokenEvent",
    "VocabMismatchError",
]
