"""How a chat reaches the loaded model and its reply comes back apart: the model's chat format (or a template the
user picked for a model without one, or a plain-text conversation), the thinking switch, the prompt's tokens, and
the reply's text split into thinking and answer as it streams.

Runs on the worker thread (it calls the engine); it never touches a widget.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from app.worker.engine_chat import (
    CHAT_TEMPLATES,
    CONTENT_PIECE,
    THINKING_PIECE,
    ReplyPiece,
    ReplySplitter,
    chat_family,
    chat_template_source,
)
from engine import (
    DROP_OLDEST,
    ChatMessage,
    ChatRequest,
    EngineProcess,
    FittedChat,
    ToolCall,
    loose_calls,
    template_tool_calls,
)

PLAIN_TEXT = "plain"  # a model's remembered choice: a plain-text (completion) conversation, no chat template
THINKING_CHOICES = ("default", "on", "off")  # the Settings switch: the template's default, or forced on / off
BUILTIN_TEMPLATES: tuple[str, ...] = tuple(CHAT_TEMPLATES)
Turn = tuple[str, ...]  # (role, content) or (role, content, reasoning): the chat as the reply session sends it;
# a reply that called tools adds its calls (OpenAI's JSON), a tool's result (role "tool") the call's id


class ToolSource(Protocol):
    """The tools a chat offers, in OpenAI's form; asked on the worker thread (it may start servers)."""

    def offered(self) -> list[dict[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class ChatChoice:
    """How to talk to the model: ``thinking`` one of :data:`THINKING_CHOICES`; ``template`` "" (the model's own), a
    builtin template's name, or :data:`PLAIN_TEXT`."""

    thinking: str = "default"
    template: str = ""
    tools: ToolSource | None = field(default=None, compare=False)  # the enabled tools (None: none offered)


@dataclass(frozen=True, slots=True)
class ModelFormat:
    """What the app shows of the loaded model's format (``template``: the choice it was read with)."""

    label: str
    has_template: bool
    thinking_switch: bool
    suggested: str | None
    template: str = ""


class _AnyTool(list[str]):
    """The tool names a reply may call, as the splitter asks: any name. The app offers no tools, but a call the model
    writes anyway is held and parsed as a call, so its markup never shows as text."""

    def __init__(self) -> None:
        super().__init__(["*"])

    def __contains__(self, name: object) -> bool:
        return True


def model_format(eng: EngineProcess, template: str = "") -> ModelFormat:
    """The loaded model's format, read with ``template`` (see :class:`ChatChoice`)."""
    suggested = eng.suggested_template()
    if template == PLAIN_TEXT:
        return ModelFormat("plain text (no chat template)", False, False, suggested, template)
    fmt = eng.chat_format(_source(template))
    return ModelFormat(fmt.label, fmt.has_template, fmt.thinking_switch, suggested, template)


def chat_messages(turns: Sequence[Turn]) -> list[ChatMessage]:
    """The chat as templates read it: an earlier reply's thinking goes back in its ``reasoning_content`` (the
    template decides whether to render it)."""
    out: list[ChatMessage] = []
    for role, content, *rest in turns:
        message: dict[str, Any] = {"role": role, "content": content}
        if rest and rest[0]:
            message["reasoning_content"] = rest[0]
        if len(rest) > 1 and rest[1]:
            if role == "tool":
                message["tool_call_id"] = rest[1]
            else:
                message["tool_calls"] = template_tool_calls(json.loads(rest[1]), "tool_calls")
        out.append(cast(ChatMessage, message))
    return out


def prepare(eng: EngineProcess, turns: Sequence[Turn], choice: ChatChoice, *, max_tokens: int,
            policy: str = DROP_OLDEST) -> tuple[FittedChat, ReplySplitter]:
    """The prompt's tokens (cut to fit the context per ``policy``, in the engine process: one request) and the
    splitter for its reply.

    Raises:
        NoChatTemplateError: The model has no chat template and the choice names none (nor plain text).
    """
    plain = choice.template == PLAIN_TEXT
    tools = choice.tools.offered() if choice.tools is not None and not plain else []
    thinking = {"on": True, "off": False}.get(choice.thinking)
    ready = eng.prepare_chat(ChatRequest(tuple(chat_messages(turns)), max_tokens, policy, _source(choice.template),
                                         thinking, tuple(tools), plain))
    family = chat_family(ready.family)
    if plain:
        return ready.fitted, ReplySplitter(family)
    splitter = ReplySplitter(family, [t["function"]["name"] for t in tools] or ("*",), ready.section)
    if not tools:
        splitter.names = _AnyTool()  # the splitter copies the names it is given into a list: any name is a call
    return ready.fitted, splitter


def _source(template: str) -> str | None:
    return chat_template_source(template) if template and template != PLAIN_TEXT else None


class ReplyText:
    """A reply's text as it streams, through its splitter: the answer's text with its draft runs, the thinking, and
    how long the thinking took (from its first text to the answer's first text)."""

    def __init__(self, splitter: ReplySplitter) -> None:
        self.splitter = splitter
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.runs: list[tuple[int, bool]] = []
        self._thinking_from: float | None = None
        self.thinking_s: float | None = None
        self.calls: list[ToolCall] = []  # the reply's calls of offered tools

    def feed(self, text: str, from_draft: bool) -> list[ReplyPiece]:
        """The pieces of the answer and the thinking safe to show now."""
        return self._take(self.splitter.feed(text), from_draft)

    def finish(self) -> list[ReplyPiece]:
        """What the splitter still held; the calls of offered tools are kept in :attr:`calls` (a call written where
        none were offered is dropped; a reply that is only a ```json call or a bare one is that call, as the server
        reads it)."""
        pieces, calls = self.splitter.finish()
        offered = not isinstance(self.splitter.names, _AnyTool)
        self.calls = calls if offered else []
        out = self._take(pieces, False)
        if offered and not calls:  # a reply that is only a call written as plain JSON, as small models write theirs
            loose = loose_calls("".join(self.content), self.splitter.names)
            if loose:
                self.calls, self.content, self.runs = loose, [], []
        if self._thinking_from is not None and self.thinking_s is None:
            self.thinking_s = time.perf_counter() - self._thinking_from
        return out

    def _take(self, pieces: list[ReplyPiece], from_draft: bool) -> list[ReplyPiece]:
        for p in pieces:
            if p.kind == THINKING_PIECE:
                if self._thinking_from is None:
                    self._thinking_from = time.perf_counter()
                self.reasoning.append(p.text)
            elif p.kind == CONTENT_PIECE:
                if self._thinking_from is not None and self.thinking_s is None:
                    self.thinking_s = time.perf_counter() - self._thinking_from
                self.content.append(p.text)
                extend_runs(self.runs, len(p.text), from_draft)
        return pieces

    def stats(self) -> dict[str, Any]:
        """What the reply's stats add: the thinking's time, where it thought."""
        return {"thinking_s": round(self.thinking_s, 2)} if self.thinking_s is not None else {}


def extend_runs(runs: list[tuple[int, bool]], length: int, from_draft: bool) -> None:
    """Add ``length`` characters to the runs of (length, came from an accepted draft)."""
    if runs and runs[-1][1] == from_draft:
        runs[-1] = (runs[-1][0] + length, from_draft)
    else:
        runs.append((length, from_draft))


__all__ = ["BUILTIN_TEMPLATES", "PLAIN_TEXT", "THINKING_CHOICES", "THINKING_PIECE", "ChatChoice", "ModelFormat",
           "ReplyPiece", "ReplyText", "ToolCall", "ToolSource", "Turn", "chat_messages", "extend_runs", "model_format",
           "prepare"]
