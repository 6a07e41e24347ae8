"""``POST /v1/responses``: OpenAI's Responses API as a thin mapping onto chat, for text, tools and JSON output.

``instructions`` and ``input`` (a string, or message, ``function_call`` and ``function_call_output`` items) become
chat messages; function tools, ``tool_choice`` and ``text.format`` become their chat forms; the chat reply's text
and tool calls become ``output`` items (streamed as the Responses events by :mod:`.responsestream`). Nothing is
stored, so ``previous_response_id`` is refused. ``include: ["message.output_text.logprobs"]`` (or ``top_logprobs``
above 0) asks for chat's logprobs, which the ``output_text`` part carries.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal

from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from .errors import APIError, parse_body
from .schemas import MAX_TOP_LOGPROBS, ChatCompletionRequest

_REFUSED = {"previous_response_id": (None,), "conversation": (None,), "background": (None, False),
            "prompt": (None,)}
LOGPROBS = "message.output_text.logprobs"  # the ``include`` entry that asks for the output text's logprobs


class ResponsesRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, gt=0)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    tools: list[dict[str, Any]] | None = None
    tool_choice: Literal["none", "auto", "required"] | dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    mode: Literal["ar", "sd", "ssd", "lookup", "auto"] | None = None
    stream: bool = False
    reasoning: dict[str, Any] | None = None  # {"effort": ...}: the chat request's reasoning_effort
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    include: list[str] | None = None  # only LOGPROBS changes the reply; the other entries name stored data

    @property
    def logprobs(self) -> bool:
        """Whether the output text carries logprobs: asked by ``include``, or by asking for alternatives."""
        return LOGPROBS in (self.include or ()) or bool(self.top_logprobs)

    @model_validator(mode="before")
    @classmethod
    def _refused(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, harmless in _REFUSED.items():
                if name in data and data[name] not in harmless:
                    raise APIError(400, f"{name}: not supported on /v1/responses by this server", param=name,
                                   code="unsupported_field")
        return data


def _text(content: Any) -> Any:
    if isinstance(content, list):  # input_text / output_text parts become chat's text parts
        return [{"type": "text", "text": p.get("text")} if isinstance(p, dict) and p.get("type") in
                ("input_text", "output_text", "text") else p for p in content]
    return content


def _messages(body: ResponsesRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": body.instructions}] if body.instructions else []
    items = [{"role": "user", "content": body.input}] if isinstance(body.input, str) else body.input
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "message":
            out.append({"role": item.get("role"), "content": _text(item.get("content"))})
        elif kind == "function_call":
            call = {"id": item.get("call_id", ""), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments", "")}}
            if out and out[-1]["role"] == "assistant" and out[-1].get("tool_calls"):
                out[-1]["tool_calls"].append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            out.append({"role": "tool", "tool_call_id": item.get("call_id", ""),
                        "content": output if isinstance(output, str) else json.dumps(output)})
        else:
            raise APIError(400, f"input[{i}].type: {kind!r} items are not supported (message, function_call and "
                           "function_call_output are)", param=f"input[{i}].type", code="unsupported_field")
    return out


def chat_request(body: ResponsesRequest) -> ChatCompletionRequest:
    """The chat request that ``body`` asks for (validated as any chat request is)."""
    chat: dict[str, Any] = {"model": body.model, "messages": _messages(body), "temperature": body.temperature,
                            "top_p": body.top_p, "max_tokens": body.max_output_tokens, "mode": body.mode,
                            "reasoning_effort": (body.reasoning or {}).get("effort"), "stream": body.stream,
                            "stream_options": {"include_usage": True} if body.stream else None}
    if body.logprobs:
        chat.update(logprobs=True, top_logprobs=body.top_logprobs or 0)
    if body.tools:
        for i, tool in enumerate(body.tools):
            if tool.get("type") != "function":
                raise APIError(400, f"tools[{i}].type: only function tools are supported, got {tool.get('type')!r}",
                               param=f"tools[{i}].type", code="unsupported_field")
        chat["tools"] = [{"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters",
                                                                              "strict") if k in t}}
                         for t in body.tools]
    choice = body.tool_choice
    chat["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}} \
        if isinstance(choice, dict) else choice
    fmt = (body.text or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        chat["response_format"] = {"type": "json_schema", "json_schema": {
            "name": fmt.get("name", "response"), "schema": fmt.get("schema", {}), "strict": fmt.get("strict")}}
    elif isinstance(fmt, dict):
        chat["response_format"] = {"type": fmt.get("type")}
    return parse_body(json.dumps({k: v for k, v in chat.items() if v is not None}).encode(), ChatCompletionRequest)


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def reasoning_item(text: str, rid: str | None = None) -> dict[str, Any]:
    return {"type": "reasoning", "id": rid or new_id("rs"), "summary": [],
            "content": [{"type": "reasoning_text", "text": text}] if text else []}


def message_item(text: str, rid: str | None = None, status: str = "completed",
                 logprobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``logprobs``: chat's ``logprobs.content`` entries, whose shape is the output text's."""
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []}
    return {"type": "message", "id": rid or new_id("msg"), "status": status, "role": "assistant",
            "content": [part] if text else []}


def call_item(call: dict[str, Any], rid: str | None = None, status: str = "completed") -> dict[str, Any]:
    """The ``function_call`` item of a chat tool call."""
    return {"type": "function_call", "id": rid or new_id("fc"), "status": status, "call_id": call["id"],
            "name": call["function"]["name"], "arguments": call["function"]["arguments"] if status == "completed"
            else ""}


def response(body: ResponsesRequest, rid: str, model: str, output: list[dict[str, Any]], finish: str | None,
             usage: dict[str, Any] | None, speculation: Any = None) -> dict[str, Any]:
    """The Responses object: in progress while ``finish`` is None, else completed or (cut at the limit)
    incomplete; ``usage``: the chat reply's."""
    cut = finish == "length"
    status = "in_progress" if finish is None else "incomplete" if cut else "completed"
    return {
        "id": rid, "object": "response", "created_at": int(time.time()), "model": model, "status": status,
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None, "error": None,
        "instructions": body.instructions, "output": output, "parallel_tool_calls": True,
        "tool_choice": body.tool_choice or "auto", "tools": body.tools or [], "temperature": body.temperature,
        "top_p": body.top_p, "max_output_tokens": body.max_output_tokens, "metadata": {},
        "text": body.text or {"format": {"type": "text"}}, "top_logprobs": body.top_logprobs,
        "usage": None if usage is None else {
            "input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
            "total_tokens": usage["total_tokens"],
            "input_tokens_details": {"cached_tokens": usage["prompt_tokens_details"]["cached_tokens"]},
            "output_tokens_details": {"reasoning_tokens": usage["completion_tokens_details"]["reasoning_tokens"]}},
        "speculation": speculation,
    }


def reply(body: ResponsesRequest, chat_reply: Response) -> Response:
    """The Responses object for a whole chat reply."""
    done = json.loads(bytes(chat_reply.body))
    choice = done["choices"][0]
    msg = choice["message"]
    output: list[dict[str, Any]] = []
    if msg.get("reasoning_content"):  # the thinking, as a reasoning item before the answer (OpenAI's shape)
        output.append(reasoning_item(msg["reasoning_content"]))
    if msg.get("content"):
        output.append(message_item(msg["content"], logprobs=(choice.get("logprobs") or {}).get("content")))
    output += [call_item(call) for call in msg.get("tool_calls") or ()]
    return JSONResponse(response(body, new_id("resp"), done["model"], output, choice["finish_reason"],
                                 done["usage"], done.get("speculation")))
