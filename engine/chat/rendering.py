"""Chat prompts: a chat template rendered in a bounded sandbox, tokenized so that only its markup can be special."""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import llama_cpp as ll

from engine.core.backend import Model
from engine.errors import ChatTemplateError, NoChatTemplateError, ParameterError

from .sandbox import StoppedError, render_messages

log = logging.getLogger(__name__)

_OPEN, _CLOSE = "\ue000", "\ue001"  # private-use characters around a placeholder: trim and upper keep them
NONCE_DIGITS = 16  # a placeholder's random part: a message cannot guess it, so it cannot forge one
_CONTROL = ll.LLAMA_TOKEN_ATTR_CONTROL | ll.LLAMA_TOKEN_ATTR_UNKNOWN  # matched only when parsing specials
_SPLIT = ll.LLAMA_TOKEN_ATTR_CONTROL | ll.LLAMA_TOKEN_ATTR_USER_DEFINED


TEXT_FIELDS = ("content", "reasoning_content")  # a turn's plain text: never markup, never a control token
TOOL_USE = "tool_use"  # the GGUF's second template (tokenizer.chat_template.tool_use), for requests with tools


class _Turn(TypedDict):
    role: str
    content: str | None


class Message(_Turn, total=False):
    """One chat turn. ``content`` may be None (an assistant turn of only tool calls: templates branch on ``content
    is none``, so it stays None); an assistant turn may carry ``tool_calls`` (arguments as objects, the form chat
    templates read: :func:`engine.chat.history.template_tool_calls`) and its ``reasoning_content`` (rendered back as
    the template writes it), and a ``tool`` turn its ``tool_call_id``."""

    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    name: str
    reasoning_content: str


@dataclass(frozen=True)
class _Guard:
    """The control-token texts of one vocabulary, and their proper prefixes and suffixes."""

    texts: tuple[str, ...]
    heads: frozenset[str]
    tails: frozenset[str]
    longest: int

    def may_form(self, content: str) -> bool:
        """Whether ``content`` holds a control token's text, or could complete one with the markup around it."""
        if any(t in content for t in self.texts):
            return True
        n = min(self.longest, len(content))
        return any(content[-j:] in self.heads or content[:j] in self.tails for j in range(1, n + 1))


_guards: weakref.WeakKeyDictionary[Model, _Guard] = weakref.WeakKeyDictionary()
_guards_lock = threading.Lock()


def _guard(model: Model) -> _Guard:
    with _guards_lock:
        guard = _guards.get(model)
    if guard is None:
        texts = tuple(t for t in {
            model.token_text(tok).decode("utf-8", "replace") for tok, attr in model.special_tokens().items()
            if attr & _CONTROL
        } if t)
        guard = _Guard(texts, frozenset(t[:j] for t in texts for j in range(1, len(t))),
                       frozenset(t[j:] for t in texts for j in range(1, len(t))), max(map(len, texts), default=0))
        with _guards_lock:
            _guards[model] = guard
    return guard


def template_source(model: Model, tools: list[dict[str, Any]] | None = None, template: str | None = None) -> str:
    """The template that renders a chat: ``template`` where given (a server's ``--chat-template``, the app's pick),
    else the GGUF's tool-use template when tools are offered and the file has one, else its default one.

    Raises:
        NoChatTemplateError: The model file has no chat template and none was given.
    """
    source = template or (model.chat_template(TOOL_USE) if tools else None) or model.chat_template() \
        or model.chat_template(TOOL_USE)
    if not source:
        raise NoChatTemplateError(
            "the model file has no chat template, so it cannot chat (it is likely a base model, made to continue "
            "text): use it for plain-text completion, or pick a chat template for it (the server's --chat-template "
            "NAME|FILE, the app's template picker)")
    return source


def _render(model: Model, messages: Sequence[Mapping[str, Any]], tools: list[dict[str, Any]] | None,
            variables: Mapping[str, Any] | None, source: str) -> str:
    bos, eos = special_texts(model)
    try:
        return render_messages(source, messages, bos, eos, tools, variables)
    except StoppedError:
        raise
    except ChatTemplateError as exc:
        refused = exc
    # A template that cannot take what OpenAI clients send (a None content, arguments as objects) is given what it
    # can take, as llama.cpp gives it: a None content as "" (Qwen3 tests '</think>' in content), arguments as JSON.
    for adapt in _ADAPTATIONS:
        adapted = adapt(messages)
        if adapted != messages:
            try:
                return render_messages(source, adapted, bos, eos, tools, variables)
            except ChatTemplateError:
                continue
    raise refused


def _empty_content(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [{**m, "content": ""} if "content" in m and m["content"] is None else m for m in messages]


def _text_arguments(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    def text(call: Mapping[str, Any]) -> Mapping[str, Any]:
        fn = call.get("function")
        if not isinstance(fn, Mapping) or isinstance(fn.get("arguments"), str):
            return call
        return {**call, "function": {**fn, "arguments": json.dumps(fn.get("arguments"), ensure_ascii=False)}}

    return [{**m, "tool_calls": [text(c) for c in m["tool_calls"]]} if m.get("tool_calls") else m for m in messages]


_ADAPTATIONS: tuple[Callable[[Sequence[Mapping[str, Any]]], Sequence[Mapping[str, Any]]], ...] = (
    _empty_content, _text_arguments, lambda ms: _text_arguments(_empty_content(ms)))


def special_texts(model: Model) -> tuple[str, str]:
    """The texts of the model's ``bos_token`` and ``eos_token`` (empty where it has none), as templates get them."""
    return (model.piece_for(model.bos) if model.bos >= 0 else "", model.piece_for(model.eos) if model.eos >= 0 else "")


def render(model: Model, messages: Sequence[Message], tools: list[dict[str, Any]] | None = None,
           variables: Mapping[str, Any] | None = None, template: str | None = None) -> str:
    """The prompt text for ``messages`` with the assistant's turn opened (for display and tests); ``variables``: the
    template's switches (enable_thinking, reasoning_effort, a request's chat_template_kwargs); ``template``: a source
    that stands in for the model's."""
    return _render(model, messages, tools, variables, template_source(model, tools, template))


def tokenize_chat(model: Model, messages: Sequence[Message], tools: list[dict[str, Any]] | None = None,
                  variables: Mapping[str, Any] | None = None, template: str | None = None) -> list[int]:
    """The prompt's tokens (arguments as for :func:`render`): the template's markup may hold special tokens, the
    turns' texts never do.

    Message contents are plain text whatever they hold: a user who types ``<|im_end|>`` gets the characters, never
    the turn boundary. Tool definitions, tool calls and variables are rendered as markup, so they may not hold a
    control token's text.

    Raises:
        NoChatTemplateError: The model has no chat template and none was given.
        ChatTemplateError: The template fails, is forbidden something, or runs past its budget.
        ParameterError: A content is not valid UTF-8; tools, tool calls or variables hold a control token's text;
            a variable would set a name the render sets itself.
    """
    source = template_source(model, tools, template)
    guard = _guard(model)
    if tools and guard.may_form(json.dumps(tools, ensure_ascii=False)):
        raise ParameterError("tools: a tool definition holds the text of one of the model's control tokens")
    if variables and guard.may_form(json.dumps(dict(variables), ensure_ascii=False, default=str)):
        raise ParameterError("chat_template_kwargs: a template variable holds the text of a control token")
    for i, m in enumerate(messages):
        if guard.may_form(json.dumps(m.get("tool_calls", []), ensure_ascii=False)):
            raise ParameterError(f"messages[{i}].tool_calls: a tool call holds the text of a control token")
    protected = {i for i, m in enumerate(messages) if any(guard.may_form(t) for t in _texts(m).values())}
    if not protected:
        text = _render(model, messages, tools, variables, source)
        return model.tokenize(text, add_special=False, parse_special=True)
    return spliced_tokens(model, messages, protected, tools, variables, source)


def _texts(m: Message) -> dict[str, str]:
    """The turn's plain texts by field (a None content is no text)."""
    return {f: t for f in TEXT_FIELDS if isinstance(t := m.get(f), str)}


def spliced_tokens(model: Model, messages: Sequence[Message], protected: set[int],
                   tools: list[dict[str, Any]] | None = None, variables: Mapping[str, Any] | None = None,
                   source: str | None = None) -> list[int]:
    """Tokens with the texts of ``protected`` messages rendered as placeholders and spliced in as text.

    While the template renders, each text that could produce a control token (it holds the text of a control or
    unknown token, or starts or ends with a piece of one) is a placeholder; the markup around the placeholders is
    tokenized with special tokens parsed (split at each special token, as llama.cpp's tokenizer splits), the texts
    without, and the pieces are spliced in order. Runs of plain text are tokenized together, so a prompt whose texts
    hold no special text gets exactly the tokens of the whole rendered text. Templates that transform a text
    (``| trim``) are followed when the result shows how. A placeholder carries a random nonce no message holds, so
    text that looks like one (typed by a user) stays text, and only the placeholders of ``protected`` are filled.
    """
    source = source or template_source(model, tools)
    nonce = _nonce(messages)
    texts = {f"{i}.{f}": t for i, m in enumerate(messages) if i in protected for f, t in _texts(m).items()}
    skeleton = _render(model, [
        {**m, **{f: f"{_OPEN}{nonce}:{i}.{f}{_CLOSE}" for f in TEXT_FIELDS if f"{i}.{f}" in texts}}
        for i, m in enumerate(messages)
    ], tools, variables, source)
    slot = re.compile(f"{_OPEN}{nonce}:({'|'.join(re.escape(k) for k in texts)}){_CLOSE}")
    parts = slot.split(skeleton)  # markup, key, markup, key, ..., markup
    real = _render(model, messages, tools, variables, source)
    for transform in _TRANSFORMS:
        filled = [p if k % 2 == 0 else transform(texts[p]) for k, p in enumerate(parts)]
        if "".join(filled) == real:
            break
    else:  # the template changes texts in a way not followed here: keep them as written
        log.info("the chat template changes message texts; protected texts are kept as written")
        filled = [p if k % 2 == 0 else texts[p] for k, p in enumerate(parts)]
    pieces: list[int | str] = []
    for k, text in enumerate(filled):
        pieces.extend(_split_markup(model, text) if k % 2 == 0 else [text])
    tokens: list[int] = []
    run: list[str] = []
    for piece in [*pieces, -1]:
        if isinstance(piece, str):
            run.append(piece)
            continue
        text = "".join(run)
        if text:
            tokens += model.tokenize(text, add_special=False, parse_special=False)
        run = []
        if piece >= 0:
            tokens.append(piece)
    return tokens


# What templates do to a turn's text, tried in order (Qwen3 writes reasoning_content.strip('\n')).
_TRANSFORMS: tuple[Callable[[str], str], ...] = (str, str.strip, lambda t: t.strip("\n"))


def _nonce(messages: Sequence[Message]) -> str:
    """Random digits that no message's content holds."""
    while True:
        nonce = str(secrets.randbelow(10**NONCE_DIGITS)).zfill(NONCE_DIGITS)
        if not any(nonce in t for m in messages for t in _texts(m).values()):
            return nonce


def _split_markup(model: Model, text: str) -> list[int | str]:
    """``text`` as plain-text pieces and the special tokens llama.cpp parses in it, in order."""
    specials = model.special_tokens()
    out: list[int | str] = []
    pos = 0
    for tok in model.tokenize(text, add_special=False, parse_special=True):
        attr = specials.get(tok, 0)
        if not attr & _SPLIT:
            continue
        piece = model.token_text(tok).decode("utf-8", "replace")
        at = text.find(piece, pos) if piece else -1
        if at < 0:
            continue
        left = text[pos:at]
        out += [left.rstrip() if attr & ll.LLAMA_TOKEN_ATTR_LSTRIP else left, tok]
        pos = at + len(piece)
        if attr & ll.LLAMA_TOKEN_ATTR_RSTRIP:
            while pos < len(text) and text[pos].isspace():
                pos += 1
    out.append(text[pos:])
    return out


def build_messages(prompt: str, system: str | None = None) -> list[Message]:
    msgs: list[Message] = []
    if system:
        msgs.append({"role": "system", "content": system})
    msgs.append({"role": "user", "content": prompt})
    return msgs
