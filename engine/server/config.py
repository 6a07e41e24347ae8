"""The server's settings and the status snapshot the app reads."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from engine import GenerationParams, ParameterError
from engine.core.mode import Mode

MAX_QUEUE = 256
MAX_BODY_BYTES = 4 << 20  # a long chat fits many times over; a bigger body is refused before it is read


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """How the local server listens and generates.

    ``generation`` is the template for every request: its mode and speculation settings (K, fan-out, ...)
    are used as they are; a request sets only ``max_tokens`` and the sampler (and may pick ``mode``).
    """

    host: str = "127.0.0.1"
    port: int = 8080  # 0: any free port (read the bound one from LocalServer.url)
    api_key: str | None = None  # Bearer key for /v1/*; None: no key
    model_id: str = ""  # the name clients send as ``model``; "" = the target file's stem
    any_model_name: bool = False  # accept any ``model`` (clients that send their own default name), not just model_id
    generation: GenerationParams = field(default_factory=lambda: GenerationParams(mode=Mode.AUTO))
    max_queue: int = 8  # requests that may wait for the engine; more get 429
    retry_after_s: int = 2  # the Retry-After header of a 429
    cors_origins: tuple[str, ...] = ()  # CORS is off unless origins are given
    allowed_hosts: tuple[str, ...] = ()  # Host names accepted besides addresses, localhost and this machine's name
    max_body_bytes: int = MAX_BODY_BYTES  # a request body over this is answered 413
    access_log: bool = False
    chat_template: str | None = None  # a template source that stands in for the model's (--chat-template)
    thinking_budget: int | None = None  # thinking tokens a reply may spend before its answer (a request may lower it)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ParameterError(f"port must be between 0 and 65535, got {self.port}")
        if not 0 <= self.max_queue <= MAX_QUEUE:
            raise ParameterError(f"queue size must be between 0 and {MAX_QUEUE}, got {self.max_queue}")
        if self.retry_after_s < 1:
            raise ParameterError(f"Retry-After must be >= 1 second, got {self.retry_after_s}")
        if self.api_key is not None and not self.api_key.strip():
            raise ParameterError("the API key must not be empty")
        if not self.host:
            raise ParameterError("the host must not be empty")
        if self.max_body_bytes < 1:
            raise ParameterError(f"the body limit must be at least 1 byte, got {self.max_body_bytes}")


@dataclass(frozen=True, slots=True)
class RunningRequest:
    """The request that holds the engine right now."""

    id: str
    endpoint: str  # "chat.completions" or "completions"
    stream: bool
    prompt_tokens: int
    completion_tokens: int  # so far
    started: float  # time.time()
    mode: str = ""  # the mode asked for (auto may run another; beside other replies a reply runs plain rounds)

    @property
    def tokens_per_second(self) -> float:
        return self.completion_tokens / max(time.time() - self.started, 1e-9)


@dataclass(frozen=True, slots=True)
class FinishedRequest:
    """A generation that has ended."""

    id: str
    endpoint: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop", "length", "cancelled" (the client left or the server stopped) or "error"
    seconds: float
    tokens_per_second: float
    mode: str  # the mode asked for ("ar", "sd", "ssd" or "auto")


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """A snapshot of the server's counters, safe to read from any thread."""

    url: str  # the API base, e.g. "http://127.0.0.1:8080/v1"; "" when not listening
    listening: bool
    served: int  # generations finished (completed, stopped or cut off by the client)
    running: RunningRequest | None
    busy: bool  # a request or the app (LocalServer.exclusive) holds the engine
    queued: int  # requests waiting for the engine
    rejected: int  # requests answered 429 because the waiting line was full
    failed: int  # error replies (4xx or 5xx), 401s and 429s excepted
    recent: tuple[FinishedRequest, ...] = ()  # the last few generations, oldest first
