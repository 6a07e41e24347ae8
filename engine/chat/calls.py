"""Pieces every family's call parser and grammar share: call ids, a JSON call object read leniently, and the
grammar of one call whose arguments follow the tool's schema."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from engine.core.errors import ParameterError
from engine.core.gbnf import prefixed
from engine.core.jsonschema import schema_grammar

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
    args = next((obj[k] for k in keys if k in obj), {})
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
