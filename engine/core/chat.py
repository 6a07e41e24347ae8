"""Chat prompts: render the GGUF's Jinja chat template in a sandbox, as llama-cpp-python does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from .backend import Model

FALLBACK_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class Message(TypedDict):
    role: str
    content: str


def render(model: Model, messages: Sequence[Message]) -> str:
    """The prompt text for ``messages`` with the assistant's turn opened."""
    template = model.chat_template() or FALLBACK_TEMPLATE
    eos = model.piece_for(model.eos) if model.eos >= 0 else ""
    bos = model.piece_for(model.bos) if model.bos >= 0 else ""
    fmt = Jinja2ChatFormatter(template, eos_token=eos, bos_token=bos, add_generation_prompt=True)
    return str(fmt(messages=[dict(m) for m in messages]).prompt)  # type: ignore[misc]


def tokenize_chat(model: Model, messages: Sequence[Message]) -> list[int]:
    return model.tokenize(render(model, messages), add_special=False, parse_special=True)


def build_messages(prompt: str, system: str | None = None) -> list[Message]:
    msgs: list[Message] = []
    if system:
        msgs.append({"role": "system", "content": system})
    msgs.append({"role": "user", "content": prompt})
    return msgs
