"""Request bodies of the OpenAI-compatible endpoints; field names and ranges as OpenAI documents them.

What the server does with each of OpenAI's fields is declared in :mod:`.fields`; a refused field that asks for
something is answered 400 before anything else is validated. Fields OpenAI does not define are ignored.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from . import fields
from .errors import APIError
from .formats import FunctionCallSpec, FunctionName, FunctionSpec, NamedChoice, ResponseFormat, ToolCallSpec, ToolSpec

ROLES = ("system", "user", "assistant", "developer", "tool", "function")  # developer: OpenAI's newer system
MAX_STOPS = 4
MAX_N = 16  # choices per request: each is a generation of its own, run one after another on the one engine
MAX_TOP_LOGPROBS = 20  # chat's top_logprobs range, as OpenAI's
MAX_TEXT_LOGPROBS = 5  # completions' logprobs range, as OpenAI's


class ChatMessage(BaseModel):
    """One message; ``content`` is a string or a list of text parts. An assistant turn may carry ``tool_calls``
    (or the legacy ``function_call``), a ``tool`` turn the ``tool_call_id`` it answers."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant", "developer", "tool", "function"]
    content: Any = None
    tool_calls: list[ToolCallSpec] | None = None
    function_call: FunctionCallSpec | None = None
    tool_call_id: str | None = None
    name: str | None = None
    reasoning_content: str | None = None  # an assistant turn's thinking, rendered back where the template reads it
    reasoning: str | None = None  # the same under the name some clients send

    @field_validator("content")
    @classmethod
    def _text_only(cls, value: Any) -> str | None:
        if value is None:
            return None  # templates branch on a missing content (an assistant turn that only calls tools)
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            parts: list[str] = []
            for part in value:
                if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                    raise ValueError("only text content is supported (a string or parts of type 'text')")
                parts.append(part["text"])
            return "".join(parts)
        raise ValueError("content must be a string or a list of text parts")

    @property
    def text(self) -> str:
        return "" if self.content is None else str(self.content)  # an omitted content is never validated

    @property
    def thinking(self) -> str | None:
        return self.reasoning_content if self.reasoning_content is not None else self.reasoning


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class _Sampling(BaseModel):
    """Fields shared by both endpoints."""

    model_config = ConfigDict(extra="ignore")
    FIELDS: ClassVar[dict[str, tuple[str, str]]] = {}  # this endpoint's table in :mod:`.fields`

    model: str
    max_tokens: int | None = Field(default=None, gt=0)
    logit_bias: dict[int, float] | None = None
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=0, le=1 << 20)  # extension (llama.cpp servers accept it too); 0 = off
    min_p: float = Field(default=0.0, ge=0.0, lt=1.0)  # extension
    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)
    stop: Any = None
    n: int = Field(default=1, ge=1, le=MAX_N)
    stream: bool = False
    stream_options: StreamOptions | None = None
    mode: Literal["ar", "sd", "ssd", "lookup", "auto"] | None = None  # extension: this request's speculation mode

    @model_validator(mode="before")
    @classmethod
    def _refused(cls, data: Any) -> Any:
        if isinstance(data, dict):
            fields.refuse(data, cls.FIELDS)
        return data

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: Any) -> list[str]:
        if value is None:
            return []
        if isinstance(value, str):
            return [value]
        if isinstance(value, list) and all(isinstance(s, str) for s in value):
            if len(value) > MAX_STOPS:
                raise ValueError(f"at most {MAX_STOPS} stop strings are allowed, got {len(value)}")
            return list(value)
        raise ValueError("stop must be a string or a list of strings")

    @property
    def stop_strings(self) -> list[str]:
        return list(self.stop or ())

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, gt=0)  # OpenAI's newer name for max_tokens
    response_format: ResponseFormat | None = None
    tools: list[ToolSpec] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedChoice | None = None
    parallel_tool_calls: bool | None = None
    functions: list[FunctionSpec] | None = None  # legacy: tools of type function
    function_call: Literal["none", "auto"] | FunctionName | None = None  # legacy: tool_choice
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None
    chat_template_kwargs: dict[str, Any] | None = None  # extension: variables for the model's chat template
    thinking_budget: int | None = Field(default=None, ge=0)  # extension: thinking tokens before the answer is due
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    FIELDS = fields.CHAT

    @model_validator(mode="after")
    def _top_needs_logprobs(self) -> ChatCompletionRequest:
        if self.top_logprobs and not self.logprobs:
            raise APIError(400, "top_logprobs: needs logprobs set to true", param="top_logprobs",
                           code="invalid_value")
        return self

    @property
    def logprob_top(self) -> int | None:
        """The alternatives per token to report (None: no logprobs asked for)."""
        return (self.top_logprobs or 0) if self.logprobs else None

    @property
    def legacy(self) -> bool:
        """Whether the request used ``functions`` (the reply then carries ``function_call``)."""
        return bool(self.functions) and not self.tools

    @property
    def tool_list(self) -> list[dict[str, Any]]:
        """The offered tools in OpenAI's form (legacy functions as tools)."""
        if self.tools:
            return [t.model_dump(exclude_none=True) for t in self.tools]
        return [{"type": "function", "function": f.model_dump(exclude_none=True)} for f in self.functions or ()]

    @property
    def choice(self) -> tuple[str, str | None]:
        """("none" | "auto" | "required" | "named", the named function)."""
        c = self.tool_choice if self.tools else self.function_call
        if isinstance(c, NamedChoice):
            return "named", c.function.name
        if isinstance(c, FunctionName):
            return "named", c.name
        return c or ("auto" if self.tool_list else "none"), None

    @property
    def token_limit(self) -> tuple[str, int | None]:
        """The field that sets the reply's length, and its value."""
        if self.max_completion_tokens is not None:
            return "max_completion_tokens", self.max_completion_tokens
        return "max_tokens", self.max_tokens


class CompletionRequest(_Sampling):
    prompt: Any
    max_tokens: int | None = Field(default=16, gt=0)  # OpenAI's default for completions
    suffix: str | None = None
    logprobs: int | None = Field(default=None, ge=0, le=MAX_TEXT_LOGPROBS)
    FIELDS = fields.COMPLETIONS

    @property
    def logprob_top(self) -> int | None:
        return self.logprobs

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, value: Any) -> str:
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if isinstance(value, str):
            return value
        raise ValueError("prompt must be a string (or a list holding one string)")

    @property
    def text(self) -> str:
        return str(self.prompt)

    @property
    def token_limit(self) -> tuple[str, int | None]:
        return "max_tokens", self.max_tokens
