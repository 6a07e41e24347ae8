"""What a model's chat format offers: its family, a thinking switch, a reasoning effort, tools; and the switches."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.core.backend import Model
from engine.errors import ChatTemplateError

from . import rendering
from .families import by_name, detect, plain
from .family import Family
from .sandbox import render_messages

ENABLE_THINKING = "enable_thinking"  # the switch most templates read (Qwen3, SmolLM3, GLM, Granite...)
REASONING_EFFORT = "reasoning_effort"  # the effort GPT-OSS's template reads
_PROBE_TOOL = {"type": "function", "function": {
    "name": "ssd_probe_tool", "description": "probe", "parameters": {"type": "object", "properties": {}}}}
_PROBE_CHAT: list[rendering.Message] = [{"role": "user", "content": "hi"}]


@dataclass(frozen=True, slots=True)
class ChatFormat:
    """A model's chat format as the app and the server show it.

    ``family``: the :class:`~.family.Family` name; ``has_template``: the model (or the picked template) has one;
    ``thinking_switch``: the template reads its family's thinking variable or ``enable_thinking``;
    ``effort_switch``: it reads ``reasoning_effort``; ``tools``: it renders offered tools into the prompt.
    """

    family: str
    label: str
    has_template: bool
    thinking_switch: bool
    effort_switch: bool
    tools: bool


def _reads(source: str, name: str | None) -> bool:
    """Whether the template's source uses the variable ``name`` (a whole identifier)."""
    return bool(name) and re.search(rf"(?<![\w.]){re.escape(name or '')}\b", source) is not None


def _renders_tools(source: str, bos: str, eos: str) -> bool:
    """Whether offering a tool changes the prompt (a template that only mentions tools, or refuses them, does not)."""
    try:
        with_tool = render_messages(source, _PROBE_CHAT, bos, eos, [_PROBE_TOOL])
    except ChatTemplateError:
        return False
    try:
        without = render_messages(source, _PROBE_CHAT, bos, eos)
    except ChatTemplateError:  # a tool-use template (Hermes 3's) renders only chats with tools
        without = ""
    return "ssd_probe_tool" in with_tool and with_tool != without


def template_format(source: str, tool_source: str | None = None, bos: str = "", eos: str = "") -> ChatFormat:
    """The format of a template's ``source`` (``tool_source``: the one used when tools are offered, if another)."""
    tool_source = tool_source or source
    family = detect(source)
    if family is plain.FAMILY:  # a default template of no family, beside a tool-use one that has one (Hermes 3)
        family = detect(tool_source)
    thinking = _reads(source, family.thinking_key) or _reads(source, ENABLE_THINKING)
    effort = _reads(source, family.effort_key) or _reads(source, REASONING_EFFORT)
    return ChatFormat(family.name, family.label, True, thinking, effort, _renders_tools(tool_source, bos, eos))


def chat_format(model: Model, template: str | None = None) -> ChatFormat:
    """The format of ``model``'s chat template, or of ``template`` (a source that stands in for the model's)."""
    try:
        source = rendering.template_source(model, None, template)
    except ChatTemplateError:
        return ChatFormat(plain.FAMILY.name, "no chat template", False, False, False, False)
    bos, eos = rendering.special_texts(model)
    return template_format(source, rendering.template_source(model, [_PROBE_TOOL], template), bos, eos)


def thinking_variables(fmt_or_family: ChatFormat | Family, on: bool | None, effort: str | None) -> dict[str, Any]:
    """The template variables that switch thinking ``on`` (None: the template's default) at ``effort`` (None: the
    default) for this format; nothing for a switch the format's template does not read."""
    if isinstance(fmt_or_family, ChatFormat):
        family = by_name(fmt_or_family.family) or plain.FAMILY
        thinking_ok, effort_ok = fmt_or_family.thinking_switch, fmt_or_family.effort_switch
    else:
        family, thinking_ok, effort_ok = fmt_or_family, True, True
    out: dict[str, Any] = {}
    if on is not None and thinking_ok:
        out[family.thinking_key or ENABLE_THINKING] = on
    if effort is not None and effort_ok:
        out[family.effort_key or REASONING_EFFORT] = effort
    return out


def reply_section(model: Model, messages: Sequence[rendering.Message], variables: Mapping[str, Any] | None = None,
                  template: str | None = None, tools: list[dict[str, Any]] | None = None) -> str:
    """The section a reply to ``messages`` starts in: ``thinking`` where the generation prompt opened a thinking
    block (QwQ, R1-distill, GLM), else ``content``.

    Raises:
        ChatTemplateError: As :func:`engine.chat.rendering.render` (NoChatTemplateError without a template).
    """
    source = rendering.template_source(model, tools, template)
    return detect(source).first_section(rendering.render(model, messages, tools, variables, source))
