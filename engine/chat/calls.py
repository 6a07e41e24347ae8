"""Pieces every family's call parser and grammar share: call ids, a JSON call object read leniently, and the
grammar of one call whose arguments follow the tool's schema."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.core.gbnf import prefixed
from engine.core.jsonschema import schema_grammar
from engine.errors import ParameterError

from .family import ToolCall

ID_HEX = 24  # a call id's random part, as long as OpenAI's
RULES = "call-"  # the schema converter's rules renamed under this prefix, so a call can sit inside markup


def new_call_id() -> str:
    return "call_" + secrets.token_hex(ID_HEX // 2)


def arguments_text(args: Any) -> str:
    """Arguments as the JSON text OpenAI carries (a string that already is JSON is kept)."""
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def json_call(body: str, names: Sequence[str], keys: Sequence[str] = ("arguments", "parameters")) -> ToolCall | None:
    """``{"name": ..., "arguments": {...}}`` (or the first of ``keys`` present) as a call of an offered tool."""
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or obj.get("name") not in names:
        return None
    args: Any = next((obj[k] for k in keys if k in obj), {})
    return ToolCall(new_call_id(), str(obj["name"]), arguments_text(args))


def offered(tools: Sequence[Mapping[str, Any]], only: str | None) -> list[tuple[str, Any]]:
    """(name, parameter schema) of the tools a forced call may name."""
    out = []
    for tool in tools:
        fn = tool.get("function") or {}
        if only is None or fn.get("name") == only:
            out.append((str(fn.get("name")), fn.get("parameters") or {"type": "object"}))
    if not out:
        raise ParameterError(f"tool_choice: no tool named {only!r} among tools")
    return out


def json_object_grammar(tools: Sequence[Mapping[str, Any]], only: str | None, key: str = "arguments") -> str:
    """GBNF rules (root ``call-root``) for one ``{"name": ..., key: {...}}`` object of an offered tool."""
    alts = [{"type": "object", "properties": {"name": {"const": name}, key: params},
             "required": ["name", key], "additionalProperties": False} for name, params in offered(tools, only)]
    return prefixed(schema_grammar(alts[0] if len(alts) == 1 else {"anyOf": alts}), RULES)


def literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def named_calls_grammar(tools: Sequence[Mapping[str, Any]], only: str | None, head: Callable[[str], str],
                        tail: str = "") -> str:
    """GBNF (root ``root``) for one call written as ``head(name)``, the tool's arguments as its schema's JSON, then
    ``tail``: the form of the families that name the tool in markup, outside the arguments."""
    alts, parts = [], []
    for i, (name, params) in enumerate(offered(tools, only)):
        pre = f"{RULES}{i}-"
        alts.append(" ".join(x for x in (literal(head(name)), f"{pre}root", literal(tail) if tail else "") if x))
        parts.append(prefixed(schema_grammar(params), pre))
    return "\n".join(["root ::= " + " | ".join(alts), *parts])


_FENCE = re.compile(r"^```[A-Za-z]*\s*(.*?)\s*```$", re.DOTALL)
LOOSE_KEYS = ("arguments", "parameters")  # the keys small models put a call's arguments under


def _loose_one(obj: Any, names: Sequence[str]) -> ToolCall | None:
    if isinstance(obj, dict) and isinstance(obj.get("function"), dict):
        obj = obj["function"]  # OpenAI's own {"type": "function", "function": {...}}, copied from the request
    if not isinstance(obj, dict) or obj.get("name") not in names:
        return None
    key = next((k for k in LOOSE_KEYS if k in obj), None)
    args = obj[key] if key else None
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None
    if not isinstance(args, dict):
        return None
    return ToolCall(new_call_id(), str(obj["name"]), arguments_text(args))


def loose_calls(text: str, names: Sequence[str]) -> list[ToolCall] | None:
    """A reply that is only a call written as plain JSON (what small models emit instead of their format's call):
    a ```json fenced block or a bare ``{"name": ..., "arguments"|"parameters": {...}}``, a list of them, or the same
    with the doubled braces templates show; None when the reply is anything else or names a tool not offered."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    if not body.startswith(("{", "[")) or not names:
        return None
    for candidate in (body, body.replace("{{", "{").replace("}}", "}")):
        try:
            obj = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        items = obj if isinstance(obj, list) else [obj]
        calls = [_loose_one(item, names) for item in items]
        if not items or any(c is None for c in calls):
            return None
        return [c for c in calls if c is not None]
    return None
