"""Llama 3.1 to 3.3: a call is bare JSON ``{"name": ..., "parameters": {...}}`` (after some text, at times), or
follows ``<|python_tag|>``, where a built-in tool is called as ``brave_search.call(query="...")``."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import RULES, arguments_text, json_call, json_object_grammar, new_call_id
from engine.chat.family import CALL, CONTENT, Family, ToolCall

PYTHON_TAG = "<|python_tag|>"
JSON_OPENS = ('{"name"', '{"type": "function"')  # how a bare JSON call begins (3.2 writes the type first)
_JSON = json.JSONDecoder()
_SEPARATORS = re.compile(r"[\s;]*")  # between two calls of one reply
_BUILTIN = re.compile(r"([A-Za-z_]\w*)\.call\((.*)\)\s*$", re.DOTALL)


def _builtin(text: str, names: Sequence[str]) -> ToolCall | None:
    """``NAME.call(key="value", ...)``, the values Python literals, as a call of an offered tool."""
    m = _BUILTIN.match(text.strip())
    if not m or m.group(1) not in names:
        return None
    try:
        node = ast.parse(f"f({m.group(2)})", mode="eval").body
        assert isinstance(node, ast.Call) and not node.args
        args = {str(kw.arg): ast.literal_eval(kw.value) for kw in node.keywords}
    except (SyntaxError, ValueError, AssertionError):
        return None
    return ToolCall(new_call_id(), m.group(1), arguments_text(args))


def _json_calls(text: str, names: Sequence[str]) -> tuple[list[ToolCall], str]:
    """The JSON calls at the start of ``text``, one after another, and the text after the last."""
    calls: list[ToolCall] = []
    pos = 0
    while True:
        at = _SEPARATORS.match(text, pos).end()  # type: ignore[union-attr]
        try:
            obj, end = _JSON.raw_decode(text, at)
        except json.JSONDecodeError:
            return calls, text[pos:]
        call = json_call(json.dumps(obj), names, ("parameters", "arguments")) if isinstance(obj, dict) else None
        if call is None:
            return calls, text[pos:]
        calls.append(call)
        pos = end


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    body = text.removeprefix(PYTHON_TAG)
    calls, rest = _json_calls(body, names)
    if not calls and body is not text:
        builtin = _builtin(body, names)
        if builtin is not None:
            return "", [builtin]
    if not calls:
        return text.strip(), []
    return rest.strip(), calls


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    return f"root ::= {RULES}root\n" + json_object_grammar(tools, only, key="parameters")


FAMILY = Family(
    name="llama3",
    label="Llama 3.1, 3.2, 3.3",
    signature=("<|start_header_id|>", "Environment: ipython"),
    transitions={CONTENT: ((PYTHON_TAG, CALL), *((m, CALL) for m in JSON_OPENS))},
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(JSON_OPENS[0], PYTHON_TAG),
    end_texts=("<|eot_id|>", "<|eom_id|>"),
    preserved=(PYTHON_TAG,),
)
