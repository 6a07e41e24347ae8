"""A chat made ready for its reply where the model is: the format read, the thinking switch set, the messages fitted
to the context and the section the reply opens in, in one request (every render and count of the fit happens here,
none crosses the engine process's pipe)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from . import format as chat_format
from . import rendering
from .families import by_name, plain
from .family import CONTENT
from .fit import DROP_OLDEST, FittedChat, fit_messages


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A chat to answer: ``template`` a source that stands in for the model's (None: the model's own); ``thinking``
    the switch forced on or off (None: the template's default); ``plain`` a plain-text conversation, no template;
    ``tools`` those offered, in OpenAI's form."""

    messages: tuple[rendering.Message, ...]
    max_tokens: int
    policy: str = DROP_OLDEST
    template: str | None = None
    thinking: bool | None = None
    tools: tuple[dict[str, Any], ...] = ()
    plain: bool = False


@dataclass(frozen=True, slots=True)
class PreparedChat:
    """The chat as it will be sent (:class:`FittedChat`), the family its reply is read with and the section (content
    or thinking) the reply starts in."""

    fitted: FittedChat
    family: str
    section: str


def plain_text(messages: Sequence[rendering.Message]) -> str:
    """A plain-text conversation as one text to continue: the system text, then each message, a reply continuing
    the text before it directly and the next message starting on a new line."""
    text, before = "", ""
    for m in messages:
        if text and m["role"] != "assistant":
            text += "\n\n" if before == "system" else "\n"
        text, before = text + (m["content"] or ""), m["role"]
    return text


class ChatPrompts(Protocol):
    """What :func:`prepare_chat` asks of an engine (``Engine``'s own methods, run where the model is)."""

    def tokenize(self, text: str) -> list[int]: ...

    def messages_tokens(self, messages: Sequence[rendering.Message], variables: Mapping[str, Any] | None = None,
                        template: str | None = None, tools: list[dict[str, Any]] | None = None) -> list[int]: ...

    def chat_format(self, template: str | None = None) -> chat_format.ChatFormat: ...

    def reply_section(self, messages: Sequence[rendering.Message], variables: Mapping[str, Any] | None = None,
                      template: str | None = None, tools: list[dict[str, Any]] | None = None) -> str: ...


def prepare_chat(prompts: ChatPrompts, n_ctx: int, request: ChatRequest) -> PreparedChat:
    """``request`` fitted to ``n_ctx`` with room for its reply (:func:`~engine.chat.fit.fit_messages`).

    Raises:
        NoChatTemplateError: The model has no chat template and the request names none (nor plain text).
        ContextFullError: As :func:`~engine.chat.fit.fit_messages`.
    """
    messages, limits = list(request.messages), {"n_ctx": n_ctx, "max_tokens": request.max_tokens}
    if request.plain:
        fitted = fit_messages(lambda ms: prompts.tokenize(plain_text(ms)), messages, **limits, policy=request.policy)
        return PreparedChat(fitted, plain.FAMILY.name, CONTENT)
    fmt = prompts.chat_format(request.template)
    family = by_name(fmt.family) or plain.FAMILY
    variables = chat_format.thinking_variables(fmt, request.thinking, None) or None
    tools = list(request.tools) or None

    def tokens(ms: Sequence[rendering.Message]) -> list[int]:
        return prompts.messages_tokens(ms, variables, request.template, tools)

    fitted = fit_messages(tokens, messages, **limits, policy=request.policy)
    section = CONTENT
    if family.think_open:
        section = prompts.reply_section(fitted.messages, variables, request.template, tools)
    return PreparedChat(fitted, family.name, section)
