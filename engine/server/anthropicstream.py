"""``POST /v1/messages`` with ``stream``: the chat reply's stream re-told (:mod:`.retell`) as Anthropic's events, in
their order: ``message_start``; per content block ``content_block_start``, its ``content_block_delta`` events
(``thinking_delta``, ``text_delta``, or a tool call's ``input_json_delta``) and ``content_block_stop``;
``message_delta`` (the stop reason and the usage) and ``message_stop``. An engine failure mid-stream is an
``error`` event."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from fastapi.responses import Response

from .anthropic import stop_reason, usage
from .responses import new_id
from .retell import TEXT, THINKING, Blocks, Chunks, Ending, restream, told

if TYPE_CHECKING:
    from .choices import Run

_DELTA = {THINKING: ("thinking_delta", "thinking"), TEXT: ("text_delta", "text")}


def event(kind: str, **fields: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields}, ensure_ascii=False)}\n\n"


class _Blocks(Blocks):
    """The content blocks of one message, numbered in order."""

    def __init__(self) -> None:
        super().__init__()
        self.index = -1

    def opened(self, kind: str) -> list[str]:
        self.index += 1
        empty = {"type": kind, kind: "", **({"signature": ""} if kind == THINKING else {})}
        return [event("content_block_start", index=self.index, content_block=empty)]

    def delta(self, kind: str, text: str) -> list[str]:
        name, key = _DELTA[kind]
        return [event("content_block_delta", index=self.index, delta={"type": name, key: text})]

    def closed(self, kind: str) -> list[str]:
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
    end = Ending()
    async for line in told(chunks, _Blocks(), end):
        yield line
    if end.error is not None:  # the generation failed
        kind = "overloaded_error" if end.error.get("type") == "server_error" else "api_error"
        yield event("error", error={"type": kind, "message": end.error.get("message", "")})
        return
    hit = run.stop_hit(0) if run is not None else None
    u = end.usage or {"prompt_tokens": n_prompt, "completion_tokens": 0, "prompt_tokens_details": {"cached_tokens": 0}}
    yield event("message_delta", delta={"stop_reason": stop_reason(end.finish, hit), "stop_sequence": hit},
                usage=usage(u["prompt_tokens"], u["completion_tokens"], u["prompt_tokens_details"]["cached_tokens"]))
    yield event("message_stop")


def stream(model: str, chat_reply: Response, run: Run | None) -> Response:
    """The event stream for a streamed chat reply (a reply that is not a stream is returned as it is)."""
    n_prompt = len(run.prompt) if run is not None else 0
    return restream(chat_reply, lambda chunks: _told(model, n_prompt, chunks, run))
