"""``POST /v1/responses`` with ``stream``: the chat reply's stream re-told (:mod:`.retell`) as the Responses API's
events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import Response

from .responses import ResponsesRequest, call_item, message_item, new_id, reasoning_item, response
from .retell import TEXT, THINKING, Blocks, Chunks, Ending, restream, told

_ITEM = {TEXT: "message", THINKING: "reasoning"}  # the output item a block of the reply's text is
_PART = {TEXT: "output_text", THINKING: "reasoning_text"}  # an item's one content part
_DELTA = {TEXT: "response.output_text", THINKING: "response.reasoning_text"}


class _Events(Blocks):
    """The events of one response, numbered, with the output items opened and closed in order."""

    def __init__(self, body: ResponsesRequest, model: str) -> None:
        super().__init__()
        self.body, self.model = body, model
        self.rid = new_id("resp")
        self.seq = 0
        self.output: list[dict[str, Any]] = []  # the items done
        self.item_id = ""
        self.text = ""
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

    def seen(self, choice: dict[str, Any]) -> None:
        self.figures += (choice.get("logprobs") or {}).get("content") or []

    def opened(self, kind: str) -> list[str]:
        self.item_id, self.text = new_id("msg" if kind == TEXT else "rs"), ""
        empty = message_item("", self.item_id, "in_progress") if kind == TEXT else reasoning_item("", self.item_id)
        return [self.event("response.output_item.added", output_index=len(self.output), item=empty),
                self.event("response.content_part.added", **self._where(), part=self._part(""))]

    def delta(self, kind: str, text: str) -> list[str]:
        self.text += text
        extra: dict[str, Any] = {"logprobs": self._figures()} if kind == TEXT else {}
        return [self.event(f"{_DELTA[kind]}.delta", **self._where(), delta=text, **extra)]

    def _figures(self) -> list[dict[str, Any]]:
        """The logprobs come since the last message delta, now the open message's."""
        new, self.figures = self.figures, []
        self.sent += new
        return new

    def closed(self, kind: str) -> list[str]:
        if kind == TEXT:
            self._figures()
        extra: dict[str, Any] = {"logprobs": self.sent} if kind == TEXT else {}
        out = [self.event(f"{_DELTA[kind]}.done", **self._where(), text=self.text, **extra),
               self.event("response.content_part.done", **self._where(), part=self._part(self.text, self.sent))]
        item = message_item(self.text, self.item_id, logprobs=self.sent) if kind == TEXT else \
            reasoning_item(self.text, self.item_id)
        out.append(self.event("response.output_item.done", output_index=len(self.output), item=item))
        self.output.append(item)
        self.sent = []
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
        return {**part, "annotations": [], "logprobs": logprobs or []} if self.kind == TEXT else part


async def _told(body: ResponsesRequest, model: str, chunks: Chunks) -> AsyncIterator[str]:
    ev = _Events(body, model)
    yield ev.lifecycle("response.created")
    yield ev.lifecycle("response.in_progress")
    end = Ending()
    async for line in told(chunks, ev, end, ev.seen):
        yield line
    if end.error is not None:  # the generation failed: the error, then the response as failed
        err = end.error
        yield ev.event("error", code=err.get("code"), message=err.get("message", ""), param=err.get("param"))
        failed = response(body, ev.rid, model, ev.output, "error", None)
        failed.update(status="failed", error={"code": err.get("code") or "server_error",
                                              "message": err.get("message", "")})
        yield ev.event("response.failed", response=failed)
        return
    done = "response.incomplete" if end.finish == "length" else "response.completed"
    yield ev.lifecycle(done, end.finish or "stop", end.usage, end.speculation)


def stream(body: ResponsesRequest, model: str, chat_reply: Response) -> Response:
    """The Responses event stream for a streamed chat reply (a reply that is not a stream, e.g. an error, as it
    is)."""
    return restream(chat_reply, lambda chunks: _told(body, model, chunks))
