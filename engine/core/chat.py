"""Chat prompts: the GGUF's chat template, rendered in a bounded sandbox, tokenized so that only the
template's own markup can become special tokens.

Message contents are plain text whatever they hold: a user who types ``<|im_end|>`` gets the
characters, never the turn boundary. A content that could produce a control token (one holds the
text of a control or unknown token, or starts or ends with a piece of one) is replaced by a
placeholder while the template renders; the markup around the placeholders is tokenized with
special tokens parsed (split at each special token, as llama.cpp's tokenizer splits), the contents
without, and the pieces are spliced in order. Runs of plain text are tokenized together, so a
prompt whose contents hold no special text gets exactly the tokens of the whole rendered text.
Templates that transform a content (``| trim``) are followed when the result shows how.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import llama_cpp as ll

from .backend import Model
from .errors import ParameterError
from .template import render_messages

log = logging.getLogger(__name__)

FALLBACK_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_OPEN, _CLOSE = "\ue000", "\ue001"  # private-use characters around a placeholder: trim and upper keep them
NONCE_DIGITS = 16  # a placeholder's random part: a message cannot guess it, so it cannot forge one
_CONTROL = ll.LLAMA_TOKEN_ATTR_CONTROL | ll.LLAMA_TOKEN_ATTR_UNKNOWN  # matched only when parsing specials
_SPLIT = ll.LLAMA_TOKEN_ATTR_CONTROL | ll.LLAMA_TOKEN_ATTR_USER_DEFINED


class _Turn(TypedDict):
    role: str
    content: str


class Message(_Turn, total=False):
    """One chat turn; an assistant turn may carry ``tool_calls`` and a ``tool`` turn its ``tool_call_id`` (in the
    form chat templates read: :func:`engine.core.tools.template_messages`)."""

    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    name: str


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


def _render(model: Model, messages: Sequence[Message], tools: list[dict[str, Any]] | None = None) -> str:
    eos = model.piece_for(model.eos) if model.eos >= 0 else ""
    bos = model.piece_for(model.bos) if model.bos >= 0 else ""
    return render_messages(model.chat_template() or FALLBACK_TEMPLATE, messages, bos, eos, tools)


def render(model: Model, messages: Sequence[Message], tools: list[dict[str, Any]] | None = None) -> str:
    """The prompt text for ``messages`` with the assistant's turn opened (for display and tests)."""
    return _render(model, messages, tools)


def tokenize_chat(model: Model, messages: Sequence[Message], tools: list[dict[str, Any]] | None = None) -> list[int]:
    """The prompt's tokens: the template's markup may hold special tokens, the contents never do. Tool definitions
    and an assistant turn's tool calls are rendered as markup, so they may not hold a control token's text.

    Raises:
        ChatTemplateError: The template fails, is forbidden something, or runs past its budget.
        ParameterError: A content is not valid UTF-8; tools or tool calls hold a control token's text.
    """
    guard = _guard(model)
    if tools and guard.may_form(json.dumps(tools, ensure_ascii=False)):
        raise ParameterError("tools: a tool definition holds the text of one of the model's control tokens")
    for i, m in enumerate(messages):
        if guard.may_form(json.dumps(m.get("tool_calls", []), ensure_ascii=False)):
            raise ParameterError(f"messages[{i}].tool_calls: a tool call holds the text of a control token")
    protected = {i for i, m in enumerate(messages) if guard.may_form(m["content"])}
    if not protected:
        return model.tokenize(_render(model, messages, tools), add_special=False, parse_special=True)
    return spliced_tokens(model, messages, protected, tools)


def spliced_tokens(model: Model, messages: Sequence[Message], protected: set[int],
                   tools: list[dict[str, Any]] | None = None) -> list[int]:
    """Tokens with the contents of ``protected`` messages rendered as placeholders and spliced in as text.

    A placeholder carries a random nonce no message holds, so text that looks like one (typed by a user)
    stays text, and only the placeholders of ``protected`` messages are filled.
    """
    nonce = _nonce(messages)
    skeleton = _render(model, [
        Message(**{**m, "content": f"{_OPEN}{nonce}:{i}{_CLOSE}"}) if i in protected else m
        for i, m in enumerate(messages)
    ], tools)
    slot = re.compile(f"{_OPEN}{nonce}:({'|'.join(str(i) for i in sorted(protected))}){_CLOSE}")
    parts = slot.split(skeleton)  # markup, index, markup, index, ..., markup
    real = _render(model, messages, tools)
    for transform in (str, str.strip):
        filled = [p if k % 2 == 0 else transform(messages[int(p)]["content"]) for k, p in enumerate(parts)]
        if "".join(filled) == real:
            break
    else:  # the template changes contents in a way not followed here: keep them as written
        log.info("the chat template changes message contents; protected contents are kept as written")
        filled = [p if k % 2 == 0 else messages[int(p)]["content"] for k, p in enumerate(parts)]
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


def _nonce(messages: Sequence[Message]) -> str:
    """Random digits that no message's content holds."""
    while True:
        nonce = str(secrets.randbelow(10**NONCE_DIGITS)).zfill(NONCE_DIGITS)
        if not any(nonce in m["content"] for m in messages):
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
