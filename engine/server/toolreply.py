"""A reply that may hold tool calls: its text streamed as content up to where a call may begin, the calls parsed
out at the end (:func:`engine.core.tools.parse_calls`), and their OpenAI shapes (``tool_calls``, or the legacy
``function_call``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.core import tools as tl

from .structured import ChatPlan


class CallStream:
    """Feed the reply's text as it comes; :meth:`feed` returns what is safe to send as content now."""

    def __init__(self, plan: ChatPlan) -> None:
        self.active = plan.calls_possible
        self.style = plan.style or tl.HERMES
        self.names = plan.names
        self._pending = ""  # a tail that may begin a call's opening tag
        self._held = ""  # from a call's opening tag on: sent only once parsed
        self._opened = False

    def feed(self, text: str) -> str:
        if not self.active:
            return text
        if self.style != tl.HERMES or self._opened:  # llama3: the whole reply may be one call
            self._held += text
            return ""
        text = self._pending + text
        at = text.find(tl.TOOL_OPEN)
        if at >= 0:
            self._opened, self._pending, self._held = True, "", text[at:]
            return text[:at]
        hold = next((n for n in range(min(len(tl.TOOL_OPEN) - 1, len(text)), 0, -1)
                     if text.endswith(tl.TOOL_OPEN[:n])), 0)
        self._pending = text[len(text) - hold:]
        return text[:len(text) - hold]

    def finish(self) -> tuple[str, list[tl.ToolCall]]:
        """The content not sent yet, and the calls."""
        rest = self._pending + self._held
        self._pending = self._held = ""
        if not self.active or not rest:
            return rest, []
        content, calls = tl.parse_calls(rest, self.style, self.names)
        return content or "", calls


def finish_reason(calls: Sequence[tl.ToolCall], legacy: bool, finish: str) -> str:
    if not calls:
        return finish
    return "function_call" if legacy else "tool_calls"


def message_calls(calls: Sequence[tl.ToolCall], legacy: bool) -> dict[str, Any]:
    """The message fields that carry ``calls``: ``tool_calls``, or the first call as ``function_call``."""
    if not calls:
        return {}
    if legacy:
        return {"function_call": {"name": calls[0].name, "arguments": calls[0].arguments}}
    return {"tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                           for c in calls]}


def delta_calls(calls: Sequence[tl.ToolCall], legacy: bool) -> dict[str, Any]:
    """The delta that streams ``calls``, each whole (clients join a call's pieces by its ``index``)."""
    if not calls:
        return {}
    if legacy:
        return message_calls(calls, legacy)
    return {"tool_calls": [{"index": i, "id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments}} for i, c in enumerate(calls)]}
