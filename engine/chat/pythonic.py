"""A pythonic call list, ``[name(a=1, b="x"), ns.other()]``, read with :mod:`ast` as literals only: no code runs, and
anything but a list of calls whose keyword arguments are literals is not a call list."""

from __future__ import annotations

import ast
from typing import Any

from engine.chat.calls import arguments_text, new_call_id
from engine.chat.family import ToolCall

# Bare names a model may write as values: Python's constants and JSON's.
NAMED = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, str | int | float | bool | type(None)):
        return node.value
    if isinstance(node, ast.Name) and node.id in NAMED:
        return NAMED[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _value(node.operand)
        if isinstance(inner, int | float) and not isinstance(inner, bool):
            return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.List | ast.Tuple):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
        return {str(_value(k)): _value(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}
    raise ValueError(f"not a literal: {ast.dump(node)}")


def _name(node: ast.expr) -> str:
    """A called name, dotted where the model namespaces it (``Calendar.create_event``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return _name(node.value) + "." + node.attr
    raise ValueError("not a name")


def call_list(text: str, names: list[str] | tuple[str, ...]) -> list[ToolCall] | None:
    """The calls ``text`` lists, or None where it is not a list of keyword-only calls of offered tools."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
        items = tree.elts if isinstance(tree, ast.List) else [tree]
        calls = []
        for item in items:
            if not isinstance(item, ast.Call) or item.args or any(k.arg is None for k in item.keywords):
                return None
            name = _name(item.func)
            if name not in names:
                return None
            args = {str(k.arg): _value(k.value) for k in item.keywords}
            calls.append(ToolCall(new_call_id(), name, arguments_text(args)))
    except (SyntaxError, ValueError, RecursionError):
        return None
    return calls or None
