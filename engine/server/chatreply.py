"""A chat reply as it streams: its text split into content, thinking and tool calls by the model's family
(:class:`~engine.chat.stream.ReplySplitter`), and the OpenAI shapes of each (``reasoning_content``, ``tool_calls``
or the legacy ``function_call``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.chat.calls import loose_calls
from engine.chat.family import CONTENT, THINKING, ToolCall
from engine.chat.stream import Piece, ReplySplitter

from . import replies
from .structured import ChatPlan

_LOOSE_STARTS = ("{", "`")  # a reply that opens so may be a call written without the format's markers


class ChatReply:
    """Feed the reply's text as it comes (:meth:`feed`: the pieces safe to send now), then :meth:`finish`.

    Where tools may be called, a reply that opens like a bare or fenced JSON object is held to the end: small
    models write their call so, and it is a call (:func:`~engine.chat.calls.loose_calls`) rather than content.
    """

    def __init__(self, plan: ChatPlan) -> None:
        self.plan = plan
        names = plan.names if plan.calls_possible else ()
        self._splitter = ReplySplitter(plan.family, names, plan.section)
        self._loose = bool(names)  # undecided: nothing of the content has been sent yet
        self._held: list[Piece] = []

    def feed(self, text: str) -> list[Piece]:
        pieces = self._splitter.feed(text)
        if not self._loose:
            return pieces
        out: list[Piece] = []
        for p in pieces:
            if p.kind != CONTENT or not self._loose:
                (self._held if self._loose and p.kind == CONTENT else out).append(p)
                continue
            self._held.append(p)
            head = "".join(h.text for h in self._held if h.kind == CONTENT).lstrip()
            if head and not head.startswith(_LOOSE_STARTS):  # plain text: nothing more to hold
                self._loose = False
                out += [h for h in self._held if h.kind == CONTENT]
                self._held = []
        return out

    def finish(self) -> tuple[list[Piece], list[ToolCall]]:
        """The pieces not sent yet, and the reply's calls."""
        rest, calls = self._splitter.finish()
        held = [*self._held, *rest]
        self._held = []
        if self._loose and not calls:
            text = "".join(p.text for p in held if p.kind == CONTENT)
            found = loose_calls(text, self.plan.names) if text.strip() else None
            if found:
                return [p for p in held if p.kind != CONTENT], found
        return held, calls


def piece_chunk(head: tuple[str, str, int, str, str], part: Piece, index: int = 0,
                logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The chunk of one piece of a chat reply (choice ``index``): content, or reasoning_content for thinking."""
    if part.kind == THINKING:
        return replies.chunk(*head, reasoning=part.text, index=index, logprobs=logprobs)
    return replies.chunk(*head, text=part.text, index=index, logprobs=logprobs)


def joined(pieces: Sequence[Piece], kind: str) -> str:
    return "".join(p.text for p in pieces if p.kind == kind)


def finish_reason(calls: Sequence[ToolCall], legacy: bool, finish: str) -> str:
    if not calls:
        return finish
    return "function_call" if legacy else "tool_calls"


def message_calls(calls: Sequence[ToolCall], legacy: bool) -> dict[str, Any]:
    """The message fields that carry ``calls``: ``tool_calls``, or the first call as ``function_call``."""
    if not calls:
        return {}
    if legacy:
        return {"function_call": {"name": calls[0].name, "arguments": calls[0].arguments}}
    return {"tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                           for c in calls]}


def delta_calls(calls: Sequence[ToolCall], legacy: bool) -> dict[str, Any]:
    """The delta that streams ``calls``, each whole (clients join a call's pieces by its ``index``)."""
    if not calls:
        return {}
    if legacy:
        return message_calls(calls, legacy)
    return {"tool_calls": [{"index": i, "id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments}} for i, c in enumerate(calls)]}
