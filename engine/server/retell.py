"""A streamed chat reply re-told as another API's events (:mod:`.responsestream`, :mod:`.anthropicstream`): the
chat stream's SSE lines read once, its thinking and text as blocks opened and closed in order, its tool calls,
and how it ended."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi.responses import Response, StreamingResponse

Chunks = AsyncIterable[str | bytes | memoryview]  # a StreamingResponse's body: the chat reply's SSE lines
THINKING, TEXT = "thinking", "text"  # the two kinds of a reply's running text
_KEYS = ((THINKING, "reasoning_content"), (TEXT, "content"))  # in the order a chunk's delta is told


class Blocks(ABC):
    """The blocks of one reply's text, opened and closed in order; each API says what the events are
    (:meth:`opened`, :meth:`delta`, :meth:`closed`, :meth:`calls`)."""

    def __init__(self) -> None:
        self.kind = ""  # the open block's kind (THINKING or TEXT), "" while none is open
        self.pending = ""  # leading whitespace, held until the block has text (a call's reply writes none)

    def text_in(self, kind: str, text: str) -> list[str]:
        """Events for ``text`` of ``kind``: the block opened first, and another open one closed before it."""
        out = self.close() if self.kind not in ("", kind) else []
        if not self.kind and not (self.pending + text).strip():
            self.pending += text
            return out
        if not self.kind:
            self.kind = kind
            text, self.pending = self.pending + text, ""
            out += self.opened(kind)
        return out + self.delta(kind, text)

    def close(self) -> list[str]:
        """Events that finish the open block (none when no block is open)."""
        self.pending = ""
        if not self.kind:
            return []
        out = self.closed(self.kind)
        self.kind = ""
        return out

    @abstractmethod
    def opened(self, kind: str) -> list[str]:
        """Events that open a block of ``kind``."""

    @abstractmethod
    def delta(self, kind: str, text: str) -> list[str]:
        """Events for more ``text`` of the open block."""

    @abstractmethod
    def closed(self, kind: str) -> list[str]:
        """Events that finish the open block of ``kind``."""

    @abstractmethod
    def calls(self, calls: list[dict[str, Any]]) -> list[str]:
        """Events for the reply's tool calls, each whole (the open block closed first: :meth:`close`)."""


@dataclass(slots=True)
class Ending:
    """How the chat stream ended: its finish reason, usage and speculation, or its error object."""

    finish: str | None = None
    usage: dict[str, Any] | None = None
    speculation: Any = None
    error: dict[str, Any] | None = None


async def told(chunks: Chunks, blocks: Blocks, end: Ending,
               seen: Callable[[dict[str, Any]], None] | None = None) -> AsyncIterator[str]:
    """``blocks``' events for the chat stream, up to its end (kept in ``end``); the last open block is closed
    unless the stream ended with an error. ``seen``: each chunk's choice, before its text is told (what more of
    it an API keeps)."""
    async for raw in chunks:
        data = (raw if isinstance(raw, str) else bytes(raw).decode()).removeprefix("data: ").strip()
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if "error" in chunk:  # the generation failed
            end.error = chunk["error"]
            return
        end.usage = chunk.get("usage") or end.usage
        end.speculation = chunk.get("speculation") or end.speculation
        for choice in chunk.get("choices") or ():
            if seen is not None:
                seen(choice)
            delta = choice.get("delta") or {}
            for kind, key in _KEYS:
                if delta.get(key):
                    for line in blocks.text_in(kind, delta[key]):
                        yield line
            if delta.get("tool_calls"):
                for line in blocks.calls(delta["tool_calls"]):
                    yield line
            end.finish = choice.get("finish_reason") or end.finish
    for line in blocks.close():
        yield line


def restream(chat_reply: Response, events: Callable[[Chunks], AsyncIterator[str]]) -> Response:
    """``events`` of a streamed chat reply as the reply (one that is not a stream, e.g. an error, as it is); the
    chat stream's own end, which stops the generation, is kept."""
    if not isinstance(chat_reply, StreamingResponse):
        return chat_reply
    return StreamingResponse(_closing(chat_reply.body_iterator, events), media_type="text/event-stream",
                             headers=dict(chat_reply.headers), background=chat_reply.background)


async def _closing(chunks: Chunks, events: Callable[[Chunks], AsyncIterator[str]]) -> AsyncIterator[str]:
    try:
        async for line in events(chunks):
            yield line
    finally:  # the chat stream's own end: it stops the generation
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()
