"""``POST /v1/messages`` with ``stream``: the chat reply's stream re-told as Anthropic's events, in their order:
``message_start``; per content block ``content_block_start``, its ``content_block_delta`` events (``thinking_delta``,
``text_delta``, or a tool call's ``input_json_delta``) and ``content_block_stop``; ``message_delta`` (the stop reason
and the usage) and ``message_stop``. An engine failure mid-stream is an ``error`` event."""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING, Any

from fastapi.responses import Response, StreamingResponse

from .anthropic import stop_reason, usage
from .responses import new_id

if TYPE_CHECKING:
    from .choices import Run

Chunks = AsyncIterable[str | bytes | memoryview]  # a StreamingResponse's body: the chat reply's SSE lines
_DELTA = {"thinking": ("thinking_delta", "thinking"), "text": ("text_delta", "text")}


def event(kind: str, **fields: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields}, ensure_ascii=False)}\n\n"


class _Blocks:
    """The content blocks of one message, opened and closed in order."""

    def __init__(self) -> None:
        self.index = -1
        self.kind = ""  # the open block's kind ("thinking" or "text"), "" while none is open
        self.pending = ""  # leading whitespace, held until the block has text (a call's reply writes none)

    def text_in(self, kind: str, text: str) -> list[str]:
        out = self.close() if self.kind not in ("", kind) else []
        if not self.kind and not (self.pending + text).strip():
            self.pending += text
            return out
        if not self.kind:
            self.kind, self.index = kind, self.index + 1
            text, self.pending = self.pending + text, ""
            empty = {"type": kind, kind: "", **({"signature": ""} if kind == "thinking" else {})}
            out.append(event("content_block_start", index=self.index, content_block=empty))
        name, key = _DELTA[kind]
        out.append(event("content_block_delta", index=self.index, delta={"type": name, key: text}))
        return out

    def close(self) -> list[str]:
        self.pending = ""
        if not self.kind:
            return []
        self.kind = ""
        return [event("content_block_stop", index=self.index)]

    def calls(self, calls: list[dict[str, Any]]) -> list[str]:
        """Each tool call as a tool_use block, its input whole in one delta."""
        out = self.close()
        for call in calls:
            self.index += 1
            block = {"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": {}}
            out += [event("content_block_start", index=self.index, content_block=block),
                    event("content_block_delta", index=self.index,
                          delta={"type": "input_json_delta", "partial_json": call["function"]["arguments"]}),
                    event("content_block_stop", index=self.index)]
        return out


async def _told(model: str, n_prompt: int, chunks: Chunks, run: Run | None) -> AsyncIterator[str]:
    start: dict[str, Any] = {"id": new_id("msg"), "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None, "usage": usage(n_prompt, 0, 0)}
    yield event("message_start", message=start)
    blocks = _Blocks()
    finish: str | None = None
    used: dict[str, Any] | None = None
    async for raw in chunks:
        data = (raw if isinstance(raw, str) else bytes(raw).decode()).removeprefix("data: ").strip()
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if "error" in chunk:  # the generation failed
            err = chunk["error"]
            kind = "overloaded_error" if err.get("type") == "server_error" else "api_error"
            yield event("error", error={"type": kind, "message": err.get("message", "")})
            return
        used = chunk.get("usage") or used
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            for kind, key in (("thinking", "reasoning_content"), ("text", "content")):
                if delta.get(key):
                    for line in blocks.text_in(kind, delta[key]):
                        yield line
            if delta.get("tool_calls"):
                for line in blocks.calls(delta["tool_calls"]):
                    yield line
            finish = choice.get("finish_reason") or finish
    for line in blocks.close():
        yield line
    hit = run.stop_hit(0) if run is not None else None
    u = used or {"prompt_tokens": n_prompt, "completion_tokens": 0, "prompt_tokens_details": {"cached_tokens": 0}}
    yield event("message_delta", delta={"stop_reason": stop_reason(finish, hit), "stop_sequence": hit},
                usage=usage(u["prompt_tokens"], u["completion_tokens"], u["prompt_tokens_details"]["cached_tokens"]))
    yield event("message_stop")


async def _events(model: str, n_prompt: int, chunks: Chunks, run: Run | None) -> AsyncIterator[str]:
    try:
        async for line in _told(model, n_prompt, chunks, run):
            yield line
    finally:  # the chat stream's own end: it stops the generation
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()


def stream(model: str, chat_reply: Response, run: Run | None) -> Response:
    """The event stream for a streamed chat reply (a reply that is not a stream is returned as it is); the chat
    stream's own end (stopping the generation) is kept."""
    if not isinstance(chat_reply, StreamingResponse):
        return chat_reply
    n_prompt = len(run.prompt) if run is not None else 0
    return StreamingResponse(_events(model, n_prompt, chat_reply.body_iterator, run), media_type="text/event-stream",
                             headers=dict(chat_reply.headers), background=chat_reply.background)
