"""What the tools give the chat: a tool as listed, a call's outcome as bounded text, failures as one line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_RESULT_CHARS = 8000  # about 2,000 tokens: a result must leave a small model's context room to answer
MAX_LINE_CHARS = 300  # a failure's message, as one line in the chat


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """One tool of a server, as it listed it (``schema``: its arguments' JSON Schema)."""

    server: str
    name: str
    description: str
    schema: dict[str, Any]

    def openai(self) -> dict[str, Any]:
        """The tool in OpenAI's form, as chat templates read it."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.schema or {"type": "object", "properties": {}}}}


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A call's result as the model and the user read it; ``error`` where the tool or its server failed."""

    text: str
    error: bool = False


def bounded_text(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with a note of what was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[truncated: {len(text) - limit} more characters were left out]"


def one_line(exc: BaseException | None) -> str:
    """An exception as one short line: the innermost of a group, its message, or its type's name."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if exc is None:
        return "unknown error"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS - 1] + "…"
