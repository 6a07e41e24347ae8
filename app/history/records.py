"""The history's records as the window reads them: a conversation, a message (one version of a reply) and a
reply's other versions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# A reply's text as runs of (length in characters, came from an accepted draft).
Runs = list[tuple[int, bool]]


@dataclass(frozen=True, slots=True)
class Conversation:
    """One conversation's row."""

    id: int
    title: str
    system_prompt: str
    created: float
    updated: float


@dataclass(frozen=True, slots=True)
class Message:
    """One message as shown; ``stats`` and ``runs`` only for replies, ``complete`` False if cut short.

    A reply regenerated keeps every version: this is version ``version`` of ``versions`` (1-based).
    ``unsaved`` marks text held in memory because the disk was full when it was written; ``reasoning`` is the
    reply's thinking, kept apart from its answer (``content``).
    """

    id: int
    conversation_id: int
    role: str
    content: str
    stats: dict[str, Any] | None
    runs: Runs | None
    complete: bool
    created: float
    version: int = 1
    versions: int = 1
    unsaved: bool = False
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] | None = None  # a reply's tool calls (OpenAI's form); a result's call id:
    tool_call_id: str = ""

    def turn(self) -> tuple[str, ...]:
        """The message as the reply session sends it: with its tool calls, or the call a result answers."""
        if self.role == "tool":
            return (self.role, self.content, "", self.tool_call_id)
        calls = (json.dumps(self.tool_calls),) if self.tool_calls else ()
        return (self.role, self.content, self.reasoning, *calls)


@dataclass(frozen=True, slots=True)
class Version:
    """One version of a reply, shown or kept."""

    content: str
    stats: dict[str, Any] | None
    complete: bool
    created: float
    shown: bool
    reasoning: str = ""
