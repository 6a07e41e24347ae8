"""Tool calling through the model's own chat template: the history in the template's form, the calls parsed back,
and a grammar that makes the model call a tool when the request says it must.

Two styles of template are known. ``hermes`` (Qwen2.5, Qwen3, Hermes): the template lists the tools and the model
answers ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, one block per call. ``llama3`` (Llama 3.1+):
the model answers a bare ``{"name": ..., "parameters": {...}}``. A template that never reads ``tools`` cannot offer
them to its model: :func:`tool_style` is None and the request is refused.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ParameterError
from .gbnf import prefixed
from .jsonschema import schema_grammar

HERMES, LLAMA3 = "hermes", "llama3"
TOOL_OPEN, TOOL_CLOSE = "<tool_call>", "</tool_call>"
_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_CALL = "call-"  # the converter's rules renamed under this prefix, so the call can sit inside the style's markup
ID_HEX = 24  # a call id's random part, as long as OpenAI's


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One parsed call: ``arguments`` is JSON text, as OpenAI's API carries it."""

    id: str
    name: str
    arguments: str


def tool_style(template: str | None) -> str | None:
    """The tool-call style of a chat template's source, or None when it does not render tools."""
    if not template or not re.search(r"\btools\b", template):
        return None
    if TOOL_OPEN in template:
        return HERMES
    if "<|python_tag|>" in template or "ipython" in template:
        return LLAMA3
    return None


def new_call_id() -> str:
    return "call_" + secrets.token_hex(ID_HEX // 2)


def _arguments_object(text: str, where: str) -> Any:
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as e:
        raise ParameterError(f"{where}.function.arguments: not valid JSON ({e.msg})") from None
    return value


def template_tool_calls(calls: Sequence[Mapping[str, Any]], where: str) -> list[dict[str, Any]]:
    """An assistant turn's OpenAI tool calls in the form chat templates read (arguments as an object)."""
    out = []
    for i, call in enumerate(calls):
        fn = call.get("function") or {}
        args = _arguments_object(str(fn.get("arguments", "")), f"{where}[{i}]")
        out.append({"id": call.get("id", ""), "type": "function",
                    "function": {"name": fn.get("name", ""), "arguments": args}})
    return out


def parse_calls(text: str, style: str, names: Sequence[str]) -> tuple[str | None, list[ToolCall]]:
    """The reply's text without its tool calls (None when nothing else is left) and the calls, in order.

    A block that is not JSON, or names no offered tool, is left in the text: the client sees what the model wrote.
    """
    if style == HERMES:
        calls: list[ToolCall] = []
        kept: list[str] = []
        pos = 0
        for m in _BLOCK.finditer(text):
            call = _call(m.group(1), "arguments", names)
            if call is not None:
                kept.append(text[pos:m.start()])
                pos = m.end()
                calls.append(call)
        kept.append(text[pos:])
        rest = "".join(kept).strip()
        return (rest or None), calls
    body = text.strip().removeprefix("<|python_tag|>").strip()
    call = _call(body, "parameters", names) if body.startswith("{") else None
    return (None, [call]) if call is not None else (text, [])


def _call(body: str, key: str, names: Sequence[str]) -> ToolCall | None:
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or obj.get("name") not in names:
        return None
    args = obj.get(key, obj.get("arguments", {}))
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return ToolCall(new_call_id(), str(obj["name"]), text)


def call_grammar(tools: Sequence[Mapping[str, Any]], style: str, only: str | None = None) -> str:
    """GBNF for exactly one call of one of ``tools`` (or of the tool named ``only``), its arguments held to the
    tool's parameter schema, in the style's markup."""
    key = "arguments" if style == HERMES else "parameters"
    alts = []
    for tool in tools:
        fn = tool.get("function") or {}
        if only is not None and fn.get("name") != only:
            continue
        params = fn.get("parameters") or {"type": "object"}
        alts.append({"type": "object", "properties": {"name": {"const": fn.get("name")}, key: params},
                     "required": ["name", key], "additionalProperties": False})
    if not alts:
        raise ParameterError(f"tool_choice: no tool named {only!r} among tools")
    call = prefixed(schema_grammar(alts[0] if len(alts) == 1 else {"anyOf": alts}), _CALL)
    root = f'root ::= "{TOOL_OPEN}\\n" {_CALL}root "\\n{TOOL_CLOSE}"' if style == HERMES else f"root ::= {_CALL}root"
    return f"{root}\n{call}"
