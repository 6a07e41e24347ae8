"""An assistant turn's tool calls in the form chat templates read (arguments as an object, as Hugging Face passes
them)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from engine.errors import ParameterError


def _arguments_object(text: str, where: str) -> Any:
    try:
        return json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as e:
        raise ParameterError(f"{where}.function.arguments: not valid JSON ({e.msg})") from None


def template_tool_calls(calls: Sequence[Mapping[str, Any]], where: str) -> list[dict[str, Any]]:
    """OpenAI tool calls as templates read them; a call's arguments that are not JSON are a ParameterError."""
    out = []
    for i, call in enumerate(calls):
        fn = call.get("function") or {}
        args = _arguments_object(str(fn.get("arguments", "")), f"{where}[{i}]")
        out.append({"id": call.get("id", ""), "type": "function",
                    "function": {"name": fn.get("name", ""), "arguments": args}})
    return out
