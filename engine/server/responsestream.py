"""``POST /v1/responses`` with ``stream``: the chat reply's stream re-told as the Responses API's events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from fastapi.responses import Response, StreamingResponse

from .responses import ResponsesRequest, call_item, message_item, new_id, reasoning_item, response

_PART = {"message": "output_text", "reasoning": "reasoning_text"}  # an item's one content part
Chunks = AsyncIterable[str | bytes | memoryview]  # a StreamingResponse's body: the chat reply's SSE lines
_DELTA = {"message": "response.output_text", "reasoning": "response.reasoning_text"}


class _Events:
    """The events of one response, numbered, with the output items opened and closed in order."""

    def __init__(self, body: ResponsesRequest, model: str) -> None:
        self.body, self.model = body, model
        self.rid = new_id("resp")
        self.seq = 0
        self.output: list[dict[str, Any]] = []  # the items done
        self.kind = ""  # the open item's kind ("message" or "reasoning"), "" while none is open
        self.item_id = ""
        self.text = ""
        self.pending = ""  # leading whitespace, held until the item has text (a call's reply writes none)
        self.figures: list[dict[str, Any]] = []  # logprobs not yet sent: the next message delta carries them
        self.sent: list[dict[str, Any]] = []  # the open message's logprobs so far

    def event(self, kind: str, **fields: Any) -> str:
        self.seq += 1
        data = json.dumps({"type": kind, "sequence_number": self.seq, **fields}, ensure_ascii=False)
        return f"event: {kind}\ndata: {data}\n\n"

    def lifecycle(self, kind: str, finish: str | None = None, usage: dict[str, Any] | None = None,
                  speculation: Any = None) -> str:
        obj = response(self.body, self.rid, self.model, list(self.output), finish, usage, speculation)
        return self.event(kind, response=obj)

    def text_in(self, kind: str, text: str) -> list[str]:
        """Events for ``text`` of a message or a reasoning item: the item opened first where another is open."""
        out = self.close() if self.kind not in ("", kind) else []
        if not self.kind and not (self.pending + text).strip():
            self.pending += text
            return out
        if not self.kind:
            self.kind, self.item_id, self.text = kind, new_id("msg" if kind == "message" else "rs"), ""
            text, self.pending = self.pending + text, ""
            empty = message_item("", self.item_id, "in_progress") if kind == "message" else \
                reasoning_item("", self.item_id)
            out.append(self.event("response.output_item.added", output_index=len(self.output), item=empty))
            out.append(self.event("response.content_part.added", **self._where(), part=self._part("")))
        self.text += text
        extra: dict[str, Any] = {"logprobs": self._figures()} if kind == "message" else {}
        out.append(self.event(f"{_DELTA[kind]}.delta", **self._where(), delta=text, **extra))
        return out

    def _figures(self) -> list[dict[str, Any]]:
        """The logprobs come since the last message delta, now the open message's."""
        new, self.figures = self.figures, []
        self.sent += new
        return new

    def close(self) -> list[str]:
        """Events that finish the open item (none when no item is open)."""
        self.pending = ""
        if not self.kind:
            return []
        if self.kind == "message":
            self._figures()
        extra: dict[str, Any] = {"logprobs": self.sent} if self.kind == "message" else {}
        out = [self.event(f"{_DELTA[self.kind]}.done", **self._where(), text=self.text, **extra),
               self.event("response.content_part.done", **self._where(), part=self._part(self.text, self.sent))]
        item = message_item(self.text, self.item_id, logprobs=self.sent) if self.kind == "message" else \
            reasoning_item(self.text, self.item_id)
        self.sent = []
        out.append(self.event("response.output_item.done", output_index=len(self.output), item=item))
        self.output.append(item)
        self.kind = ""
        return out

    def calls(self, calls: list[dict[str, Any]]) -> list[str]:
        """Events for the reply's tool calls, each whole: its item, its arguments in one delta, done."""
        out = self.close()
        for call in calls:
            item = call_item(call, status="in_progress")
            at = {"item_id": item["id"], "output_index": len(self.output)}
            args = call["function"]["arguments"]
            out += [self.event("response.output_item.added", output_index=at["output_index"], item=item),
                    self.event("response.function_call_arguments.delta", **at, delta=args),
                    self.event("response.function_call_arguments.done", **at, arguments=args,
                               name=call["function"]["name"])]
            done = call_item(call, item["id"])
            out.append(self.event("response.output_item.done", output_index=at["output_index"], item=done))
            self.output.append(done)
        return out

    def _where(self) -> dict[str, Any]:
        return {"item_id": self.item_id, "output_index": len(self.output), "content_index": 0}

    def _part(self, text: str, logprobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        part = {"type": _PART[self.kind], "text": text}
        return {**part, "annotations": [], "logprobs": logprobs or []} if self.kind == "message" else part


async def _events(body: ResponsesRequest, model: str, chunks: Chunks) -> AsyncIterator[str]:
    try:
        async for line in _told(body, model, chunks):
            yield line
    finally:  # the chat stream's own end: it stops the generation
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()


async def _told(body: ResponsesRequest, model: str, chunks: Chunks) -> AsyncIterator[str]:
    ev = _Events(body, model)
    yield ev.lifecycle("response.created")
    yield ev.lifecycle("response.in_progress")
    finish: str | None = None
    usage: dict[str, Any] | None = None
    speculation: Any = None
    async for raw in chunks:
        data = (raw if isinstance(raw, str) else bytes(raw).decode()).removeprefix("data: ").strip()
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if "error" in chunk:  # the generation failed: the error, then the response as failed
            err = chunk["error"]
            yield ev.event("error", code=err.get("code"), message=err.get("message", ""), param=err.get("param"))
            failed = response(body, ev.rid, model, ev.output, "error", None)
            failed.update(status="failed", error={"code": err.get("code") or "server_error",
                                                  "message": err.get("message", "")})
            yield ev.event("response.failed", response=failed)
            return
        usage = chunk.get("usage") or usage
        speculation = chunk.get("speculation") or speculation
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            ev.figures += (choice.get("logprobs") or {}).get("content") or []
            for kind, key in (("reasoning", "reasoning_content"), ("message", "content")):
                if delta.get(key):
                    for line in ev.text_in(kind, delta[key]):
                        yield line
            if delta.get("tool_calls"):
                for line in ev.calls(delta["tool_calls"]):
                    yield line
            finish = choice.get("finish_reason") or finish
    for line in ev.close():
        yield line
    done = "response.incomplete" if finish == "length" else "response.completed"
    yield ev.lifecycle(done, finish or "stop", usage, speculation)


def stream(body: ResponsesRequest, model: str, chat_reply: Response) -> Response:
    """The Responses event stream for a streamed chat reply (a reply that is not a stream, e.g. an error, as it
    is); the chat stream's own end (stopping the generation) is kept."""
    if not isinstance(chat_reply, StreamingResponse):
        return chat_reply
    return StreamingResponse(_events(body, model, chat_reply.body_iterator), media_type="text/event-stream",
                             headers=dict(chat_reply.headers), background=chat_reply.background)
