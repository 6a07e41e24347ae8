"""ssd-chat's engine: llama.cpp decoding with ar, sd, ssd and auto; model distribution; tools. Never imports Qt.

This module is the engine's public surface: ``app/`` (and the local server) import only from here, and from
``engine.server``, the local OpenAI-compatible server's own face (it stands above this one and loads FastAPI only
when a name of it is used). ``hub`` and ``offline`` are exported as modules because callers use (and tests replace)
their functions.
"""

from .batch.promptcache import CacheUse
from .chat import builtin as chat_builtin
from .chat.calls import loose_calls
from .chat.families import by_name as chat_family_named
from .chat.families import plain as plain_family
from .chat.family import CONTENT as CONTENT_PIECE
from .chat.family import THINKING as THINKING_PIECE
from .chat.family import Family as ChatFamily
from .chat.family import ToolCall
from .chat.fit import DROP_OLDEST, OVERFLOW_POLICIES, FittedChat, fit_messages
from .chat.format import ChatFormat, thinking_variables
from .chat.history import template_tool_calls
from .chat.prepare import ChatRequest, PreparedChat
from .chat.rendering import Message as ChatMessage
from .chat.stream import Piece as ReplyPiece
from .chat.stream import ReplySplitter
from .core.backend import loaded as loaded_placement
from .core.cpu_check import Override as CpuCheckOverride
from .core.cpu_check import Status as CpuCheckStatus
from .core.cpu_check import Verdict as CpuCheckVerdict
from .core.cpu_check import check as check_cpu
from .core.cpu_check import set_override as set_cpu_check_override
from .core.cpu_check import status as cpu_check_status
from .core.gumbel import COUPLED, REJECTION, score_margin
from .core.mode import Mode
from .core.options import (
    ALL_LAYERS,
    AUTO_LAYERS,
    MAX_BRANCHES,
    MAX_CONTEXT,
    MAX_FANOUT,
    MAX_K,
    MODES,
    OPTIONS,
    Option,
    cpu_cores,
)
from .core.paths import user_data_dir
from .core.placement import Device as GpuDevice
from .core.placement import Placement, place_layers
from .core.sampling import SamplingParams
from .engine import Engine, EngineConfig, GenerationParams
from .errors import (
    ChatTemplateError,
    ContextFullError,
    DiskFullError,
    EngineError,
    ModelFileChangedError,
    ModelLoadError,
    NoChatTemplateError,
    ParameterError,
    VocabMismatchError,
)
from .generation import Generation, TokenEvent
from .models import archs as model_archs
from .models import drafts as hub_drafts
from .models import hub, hubpair, offline
from .models import search as hub_search
from .models.catalog import PairSpec, fit_label, format_bytes, load_catalog, system_memory
from .models.hub import DownloadCancelled, DownloadProgress
from .models.installed import InstalledPair, installed_as
from .models.store import ModelStore
from .native.offload import supports_gpu_offload
from .native.startup import init_backend
from .process import EngineProcess, EngineStopped
from .process.cpu_probe import write_kquant_model
from .process.protocol import STOPPED as ENGINE_STOPPED
from .remote import ask_remote_machines, remote_endpoints
from .speculative.exactness import Verification, VerifyProgress, first_difference, setting_of
from .speculative.plan import MeasuredRate
from .stats import GenerationStats, drafting_warning
from .tiny.models import TinyPair, write_model

__all__ = [
    "ALL_LAYERS",
    "AUTO_LAYERS",
    "CONTENT_PIECE",
    "COUPLED",
    "DROP_OLDEST",
    "ENGINE_STOPPED",
    "MAX_BRANCHES",
    "MAX_CONTEXT",
    "MAX_FANOUT",
    "MAX_K",
    "MODES",
    "OPTIONS",
    "OVERFLOW_POLICIES",
    "REJECTION",
    "THINKING_PIECE",
    "CacheUse",
    "ChatFamily",
    "ChatFormat",
    "ChatMessage",
    "ChatRequest",
    "ChatTemplateError",
    "ContextFullError",
    "CpuCheckOverride",
    "CpuCheckStatus",
    "CpuCheckVerdict",
    "DiskFullError",
    "DownloadCancelled",
    "DownloadProgress",
    "Engine",
    "EngineConfig",
    "EngineError",
    "EngineProcess",
    "EngineStopped",
    "FittedChat",
    "Generation",
    "GenerationParams",
    "GenerationStats",
    "GpuDevice",
    "InstalledPair",
    "MeasuredRate",
    "Mode",
    "ModelFileChangedError",
    "ModelLoadError",
    "ModelStore",
    "NoChatTemplateError",
    "Option",
    "PairSpec",
    "ParameterError",
    "Placement",
    "PreparedChat",
    "ReplyPiece",
    "ReplySplitter",
    "SamplingParams",
    "TinyPair",
    "TokenEvent",
    "ToolCall",
    "Verification",
    "VerifyProgress",
    "VocabMismatchError",
    "ask_remote_machines",
    "chat_builtin",
    "chat_family_named",
    "check_cpu",
    "cpu_check_status",
    "cpu_cores",
    "drafting_warning",
    "first_difference",
    "fit_label",
    "fit_messages",
    "format_bytes",
    "hub",
    "hub_drafts",
    "hub_search",
    "hubpair",
    "init_backend",
    "installed_as",
    "load_catalog",
    "loaded_placement",
    "loose_calls",
    "model_archs",
    "offline",
    "place_layers",
    "plain_family",
    "remote_endpoints",
    "score_margin",
    "set_cpu_check_override",
    "setting_of",
    "supports_gpu_offload",
    "system_memory",
    "template_tool_calls",
    "thinking_variables",
    "user_data_dir",
    "write_kquant_model",
    "write_model",
]
