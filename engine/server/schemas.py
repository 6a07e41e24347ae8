"""Request bodies of the OpenAI-compatible endpoints; field names and ranges as OpenAI documents them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

ROLES = ("system", "user", "assistant", "developer")  # "developer" is OpenAI's newer name for system
MAX_STOPS = 4


class ChatMessage(BaseModel):
    """One message; ``content`` is a string or a list of text parts."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant", "developer"]
    content: Any = None

    @field_validator("content")
    @classmethod
    def _text_only(cls, value: Any) -> str:
        if value is None:
            return ""
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
        return str(self.content)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class _Sampling(BaseModel):
    """Fields shared by both endpoints."""

    model_config = ConfigDict(extra="ignore")

    model: str
    max_tokens: int | None = Field(default=None, gt=0)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=0, le=1 << 20)  # extension (llama.cpp servers accept it too); 0 = off
    min_p: float = Field(default=0.0, ge=0.0, lt=1.0)  # extension
    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)
    stop: Any = None
    n: int = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    mode: Literal["ar", "sd", "ssd", "auto"] | None = None  # extension: the speculation mode for this request
    logprobs: Any = None

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

    @field_validator("n")
    @classmethod
    def _one(cls, value: int) -> int:
        if value != 1:
            raise ValueError(f"only n=1 is supported, got {value}")
        return value

    @field_validator("logprobs")
    @classmethod
    def _no_logprobs(cls, value: Any) -> None:
        if value not in (None, False, 0):
            raise ValueError("logprobs are not supported")
        return None

    @property
    def stop_strings(self) -> list[str]:
        return list(self.stop or ())

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, gt=0)  # OpenAI's newer name for max_tokens
    tools: Any = None

    @field_validator("tools")
    @classmethod
    def _no_tools(cls, value: Any) -> None:
        if value:
            raise ValueError("tool calls are not supported")
        return None

    @property
    def token_limit(self) -> tuple[str, int | None]:
        """The field that sets the reply's length, and its value."""
        if self.max_completion_tokens is not None:
            return "max_completion_tokens", self.max_completion_tokens
        return "max_tokens", self.max_tokens


class CompletionRequest(_Sampling):
    prompt: Any
    max_tokens: int | None = Field(default=16, gt=0)  # OpenAI's default for completions
    echo: bool = False
    suffix: str | None = None

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

    @field_validator("echo")
    @classmethod
    def _no_echo(cls, value: bool) -> bool:
        if value:
            raise ValueError("echo is not supported")
        return value

    @field_validator("suffix")
    @classmethod
    def _no_suffix(cls, value: str | None) -> None:
        if value:
            raise ValueError("suffix is not supported")
        return None

    @property
    def token_limit(self) -> tuple[str, int | None]:
        return "max_tokens", self.max_tokens
