"""``POST /v1/messages``: Anthropic's Messages API as a mapping onto chat, for text, tools and thinking.

``system`` and ``messages`` (text, ``tool_use``, ``tool_result`` and ``thinking`` blocks) become chat messages;
``tools`` (``input_schema``), ``tool_choice`` (auto, any, tool, none), ``thinking`` (on, with an optional budget,
or disabled), ``output_config`` (``effort``, and ``format``: a JSON schema) and ``stop_sequences`` their chat
forms; the chat reply's thinking, text and tool calls become content blocks (streamed as Anthropic's events by
:mod:`.anthropicstream`). Errors have Anthropic's shape: ``{"type": "error", "error": {"type", "message"}}``.
``/v1/messages/count_tokens`` counts the prompt.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import APIError, parse_body
from .responses import new_id
from .schemas import MAX_STOPS, ChatCompletionRequest

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error"}
STOP_REASONS = {"tool_calls": "tool_use", "length": "max_tokens", "stop": "end_turn"}
THINKING_ON = ("enabled", "adaptive", "between_tools")  # the thinking types that turn a template's thinking on
EFFORTS = {"xhigh": "high", "max": "high"}  # Anthropic's efforts past chat's highest
BLOCK_JOIN = "\n\n"  # a turn's text blocks, one after another: each stays a paragraph of its own
MESSAGES_PATHS = ("/v1/messages", "/v1/messages/count_tokens")  # the paths whose errors have Anthropic's shape


class CountRequest(BaseModel):
    """The fields a prompt is made of (``count_tokens`` takes these alone)."""

    model_config = ConfigDict(extra="ignore")

    model: str
    messages: list[dict[str, Any]] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    output_config: dict[str, Any] | None = None  # effort, and format: a JSON schema the reply must match


class MessagesRequest(CountRequest):
    max_tokens: int = Field(gt=0)
    stop_sequences: list[str] | None = None
    stream: bool = False
    temperature: float = Field(default=1.0, ge=0.0, le=1.0)  # Anthropic's range
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=0)
    mode: Literal["ar", "sd", "ssd", "lookup", "auto"] | None = None  # extension: the speculation mode


def error_body(exc: APIError) -> dict[str, Any]:
    kind = ERROR_TYPES.get(exc.status, "api_error" if exc.status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": exc.message}}


def error_response(exc: APIError) -> JSONResponse:
    return JSONResponse(error_body(exc), status_code=exc.status, headers=exc.headers)


def _bad(where: str, message: str) -> APIError:
    return APIError(400, f"{where}: {message}", param=where, code="invalid_value")


def _text(content: Any, where: str) -> str:
    """A string, or text blocks joined (anything else is refused by name)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(where, "must be a string or a list of content blocks")
    parts: list[str] = []
    for j, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            raise _bad(f"{where}[{j}]", f"{kind!r} blocks are not supported here (text blocks are)")
        parts.append(block["text"])
    return BLOCK_JOIN.join(parts)


def _user(blocks: list[Any], where: str) -> list[dict[str, Any]]:
    """A user turn: its tool results (each a tool message, first: they answer the turn before) and its text."""
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    for j, b in enumerate(blocks):
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text" and isinstance(b.get("text"), str):
            texts.append(b["text"])
        elif kind == "tool_result":
            body = _text(b.get("content", ""), f"{where}[{j}].content")
            out.append({"role": "tool", "tool_call_id": str(b.get("tool_use_id", "")),
                        "content": f"Error: {body}" if b.get("is_error") else body})
        else:
            raise _bad(f"{where}[{j}].type", f"{kind!r} blocks are not supported in a user turn (text and "
                       "tool_result are)")
    if texts:
        out.append({"role": "user", "content": BLOCK_JOIN.join(texts)})
    return out


def _assistant(blocks: list[Any], where: str) -> dict[str, Any]:
    """An assistant turn: its text, its tool_use blocks as tool calls, its thinking as reasoning_content."""
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, b in enumerate(blocks):
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text" and isinstance(b.get("text"), str):
            texts.append(b["text"])
        elif kind == "tool_use":
            calls.append({"id": str(b.get("id", "")), "type": "function",
                          "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {})}})
        elif kind == "thinking" and isinstance(b.get("thinking"), str):
            thinking.append(b["thinking"])
        elif kind != "redacted_thinking":  # another server's encrypted thinking: nothing to render
            raise _bad(f"{where}[{j}].type", f"{kind!r} blocks are not supported in an assistant turn (text, "
                       "tool_use and thinking are)")
    msg: dict[str, Any] = {"role": "assistant", "content": BLOCK_JOIN.join(texts) if texts else None}
    if calls:
        msg["tool_calls"] = calls
    if thinking:
        msg["reasoning_content"] = BLOCK_JOIN.join(thinking)
    return msg


def _messages(body: CountRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if body.system:
        out.append({"role": "system", "content": _text(body.system, "system")})
    for i, m in enumerate(body.messages):
        role, content = m.get("role"), m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise _bad(f"messages[{i}].content", "must be a string or a list of content blocks")
        if role == "user":
            out += _user(blocks, f"messages[{i}].content")
        elif role == "assistant":
            out.append(_assistant(blocks, f"messages[{i}].content"))
        else:
            raise _bad(f"messages[{i}].role", f"must be 'user' or 'assistant', got {role!r}")
    return out


def _tools(body: CountRequest) -> list[dict[str, Any]]:
    out = []
    for i, t in enumerate(body.tools or ()):
        if t.get("type") not in (None, "custom") or "input_schema" not in t:
            raise _bad(f"tools[{i}]", f"only custom tools with an input_schema are supported, got type "
                       f"{t.get('type')!r}")
        fn = {"name": t.get("name"), "parameters": t["input_schema"]}
        if t.get("description"):
            fn["description"] = t["description"]
        out.append({"type": "function", "function": fn})
    return out


def chat_request(body: CountRequest) -> ChatCompletionRequest:
    """The chat request that ``body`` asks for (validated as any chat request is)."""
    chat: dict[str, Any] = {"model": body.model, "messages": _messages(body)}
    if body.tools:
        chat["tools"] = _tools(body)
    choice = body.tool_choice or {}
    kind = choice.get("type")
    if kind is not None:
        named = {"type": "function", "function": {"name": choice.get("name")}}
        mapped = {"auto": "auto", "any": "required", "none": "none", "tool": named}.get(kind)
        if mapped is None:
            raise _bad("tool_choice.type", f"must be auto, any, tool or none, got {kind!r}")
        chat["tool_choice"] = mapped
        if choice.get("disable_parallel_tool_use"):
            chat["parallel_tool_calls"] = False
    out = body.output_config or {}
    if out.get("effort") is not None:
        chat["reasoning_effort"] = EFFORTS.get(out["effort"], out["effort"])
    thinking = body.thinking or {}
    if thinking.get("type") in THINKING_ON:
        chat["reasoning_effort"] = chat.get("reasoning_effort") or "high"
        if isinstance(thinking.get("budget_tokens"), int):
            chat["thinking_budget"] = thinking["budget_tokens"]
    elif thinking.get("type") == "disabled":
        chat["reasoning_effort"] = "none"
    fmt = out.get("format")
    if isinstance(fmt, dict):
        if fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
            raise _bad("output_config.format", "must be {\"type\": \"json_schema\", \"schema\": {...}}")
        chat["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt["schema"]}}
    if isinstance(body, MessagesRequest):
        stops = body.stop_sequences or []
        if len(stops) > MAX_STOPS:
            raise _bad("stop_sequences", f"at most {MAX_STOPS} stop sequences are supported, got {len(stops)}")
        chat.update(max_tokens=body.max_tokens, temperature=body.temperature, top_p=body.top_p, top_k=body.top_k,
                    stop=stops or None, mode=body.mode, stream=body.stream,
                    stream_options={"include_usage": True} if body.stream else None)
    return parse_body(json.dumps({k: v for k, v in chat.items() if v is not None}).encode(), ChatCompletionRequest)


def usage(prompt: int, output: int, cached: int) -> dict[str, Any]:
    """Anthropic's counts: ``input_tokens`` are the prompt's tokens read, the rest ``cache_read_input_tokens``."""
    return {"input_tokens": prompt - cached, "output_tokens": output, "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0}


def tool_input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def stop_reason(finish: str | None, stop_hit: str | None) -> str:
    return "stop_sequence" if stop_hit is not None else STOP_REASONS.get(finish or "stop", "end_turn")


def reply(body: MessagesRequest, chat_reply: Response, stop_hit: str | None) -> Response:
    """The Message object for a whole chat reply."""
    done = json.loads(bytes(chat_reply.body))
    choice = done["choices"][0]
    msg = choice["message"]
    content: list[dict[str, Any]] = []
    if msg.get("reasoning_content"):
        content.append({"type": "thinking", "thinking": msg["reasoning_content"], "signature": ""})
    if msg.get("content"):
        content.append({"type": "text", "text": msg["content"]})
    for call in msg.get("tool_calls") or ():
        content.append({"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                        "input": tool_input(call["function"]["arguments"])})
    u = done["usage"]
    return JSONResponse({
        "id": new_id("msg"), "type": "message", "role": "assistant", "model": done["model"], "content": content,
        "stop_reason": stop_reason(choice["finish_reason"], stop_hit), "stop_sequence": stop_hit,
        "usage": usage(u["prompt_tokens"], u["completion_tokens"], u["prompt_tokens_details"]["cached_tokens"]),
        "speculation": done.get("speculation")})


class ApiKeyHeader:
    """Anthropic's clients send the key as ``x-api-key``: taken as ``Authorization: Bearer`` where none is given."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if b"x-api-key" in headers and b"authorization" not in headers:
                bearer = (b"authorization", b"Bearer " + headers[b"x-api-key"])
                scope = {**scope, "headers": [*scope["headers"], bearer]}
        await self.app(scope, receive, send)


def parse(raw: bytes, count: bool = False) -> CountRequest:
    return parse_body(raw, CountRequest if count else MessagesRequest)
