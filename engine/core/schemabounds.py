"""Bounds on a JSON Schema before it becomes a grammar, and the size budget its grammar is built under."""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from llama_cpp import llama_grammar

from engine.errors import ParameterError

# A count past the minimum becomes one more nested optional group in the converter's GBNF, and llama.cpp's parser
# refuses more than about 1,000 of them in a row (and overflows its stack near 20,000, killing the process).
MAX_COUNT = 1000  # minItems, maxItems, minLength, maxLength, and the numbers of a pattern's {m,n}
MAX_ENUM = 1000  # values of one enum: OpenAI's own limit; each value is an alternative tried at every token
MAX_ALTERNATIVES = 256  # anyOf/oneOf/allOf/prefixItems entries: a call grammar has one per tool, OpenAI takes 128 tools
MAX_PROPERTIES = 500  # properties of one object: the converter recurses once per optional one (1,000 stop it)
MAX_DEPTH = 64  # objects and arrays nested in the schema's JSON: about 32 schema levels, OpenAI allows 10
MAX_PATTERN = 1000  # characters of one pattern: its groups nest in one GBNF rule
MAX_SCHEMA_BYTES = 1 << 20  # the schema as JSON text
MAX_GRAMMAR_BYTES = 1 << 20  # the built GBNF: llama.cpp parses 1 MB in about 15 ms; the build is stopped past it
MAX_GROUP_DEPTH = 1100  # parenthesised groups nested in one GBNF rule: llama.cpp's parser recurses once per group

COUNTS = (("minItems", "maxItems"), ("minLength", "maxLength"))
ALTERNATIVES = ("anyOf", "oneOf", "allOf", "prefixItems")
_QUANTIFIER = re.compile(r"(?<!\\)\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")


class SchemaError(ParameterError):
    """A JSON Schema the grammar cannot express; ``construct`` names the keyword."""

    def __init__(self, construct: str, where: str, why: str) -> None:
        at = f" at {where}" if where else ""
        super().__init__(f"the schema's {construct}{at} {why}")
        self.construct = construct


def check_size(schema: Any) -> None:
    """Refuse a schema nested deeper than :data:`MAX_DEPTH` or longer than :data:`MAX_SCHEMA_BYTES` as JSON; walked
    without recursion, so that the checks after it (which recurse) meet only a bounded depth."""
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        if children and depth > MAX_DEPTH:
            raise SchemaError("nesting", "", f"is deeper than {MAX_DEPTH} levels of objects and arrays (the limit)")
        stack.extend((child, depth + 1) for child in children)
    size = len(json.dumps(schema))
    if size > MAX_SCHEMA_BYTES:
        raise SchemaError("size", "", f"is {size} bytes as JSON; the limit is {MAX_SCHEMA_BYTES}")


def check_node(node: dict[str, Any], where: str) -> None:
    """Refuse a count past its limit or contradicting its pair, and too many enum values, alternatives or
    properties, naming the keyword and the limit."""
    for low, high in COUNTS:
        lo, hi = _count(node, low, where), _count(node, high, where)
        if lo is not None and hi is not None and lo > hi:
            raise SchemaError(f"'{low}'", where, f"is {lo}, more than its '{high}' {hi}: no value can satisfy both")
    _at_most(node, "enum", MAX_ENUM, where, "values")
    for key in ALTERNATIVES:
        _at_most(node, key, MAX_ALTERNATIVES, where, "entries")
    _at_most(node, "properties", MAX_PROPERTIES, where, "properties")
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        if len(pattern) > MAX_PATTERN:
            raise SchemaError("'pattern'", where, f"is {len(pattern)} characters; the limit is {MAX_PATTERN}")
        for m in _QUANTIFIER.finditer(pattern):
            for number in m.groups():
                if number and int(number) > MAX_COUNT:
                    raise SchemaError("'pattern'", where, f"has the quantifier '{m.group(0)}': more than "
                                      f"{MAX_COUNT} repetitions (the limit)")


def _count(node: dict[str, Any], key: str, where: str) -> int | None:
    """The value of count keyword ``key``: a whole number from 0 to :data:`MAX_COUNT`."""
    value = node.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SchemaError(f"'{key}'", where, f"must be a whole number, not {json.dumps(value)[:40]}")
    if value < 0:
        raise SchemaError(f"'{key}'", where, f"is {json.dumps(value)}; it cannot be negative")
    if value > MAX_COUNT:
        raise SchemaError(f"'{key}'", where, f"is {json.dumps(value)}; the most this server takes is {MAX_COUNT}")
    if value != int(value) or not isinstance(value, int):
        raise SchemaError(f"'{key}'", where, f"must be a whole number written without a fraction, not {value}")
    return value


def _at_most(node: dict[str, Any], key: str, limit: int, where: str, what: str) -> None:
    value = node.get(key)
    if isinstance(value, list | dict) and len(value) > limit:
        raise SchemaError(f"'{key}'", where, f"has {len(value)} {what}; the most this server takes is {limit}")


class _OverBudget(Exception):
    """The grammar being built passed :data:`MAX_GRAMMAR_BYTES`."""


_budget = threading.local()  # bytes the current thread's build may still write; absent outside a build
_build_repetition: Callable[..., str] = llama_grammar._build_repetition


def _budgeted_repetition(item_rule: str, min_items: int, max_items: int | None, separator_rule: str | None = None,
                         item_rule_is_literal: bool = False) -> str:
    """The converter's repetition, charged to the build's budget before its text is made."""
    left: int | None = getattr(_budget, "left", None)
    if left is not None:
        cost = max(min_items, max_items or 0) * (len(item_rule) + len(separator_rule or "") + 4)
        if cost > left:
            raise _OverBudget
        _budget.left = left - cost
    return _build_repetition(item_rule, min_items, max_items, separator_rule, item_rule_is_literal)


# WORKAROUND: the converter (llama-cpp-python's port of llama.cpp's json_schema_to_grammar.py) builds every count,
# a schema's and a pattern's alike, through this one module function, so a budget there bounds the whole build.
llama_grammar._build_repetition = _budgeted_repetition


@contextmanager
def grammar_budget() -> Iterator[None]:
    """Every grammar built inside shares one budget of :data:`MAX_GRAMMAR_BYTES` (a request's tools and its
    schema together); inside another, the outer budget holds."""
    if getattr(_budget, "left", None) is not None:
        yield
        return
    _budget.left = MAX_GRAMMAR_BYTES
    try:
        yield
    finally:
        del _budget.left


def build_under_budget(convert: Callable[[str], Any], text: str) -> str:
    """``convert(text)`` as GBNF, stopped once the budget's grammars would pass :data:`MAX_GRAMMAR_BYTES`, and
    refused when its groups nest deeper than :data:`MAX_GROUP_DEPTH`; running out of memory is refused with a
    reason too."""
    over = SchemaError("size", "", f"would make grammars over {MAX_GRAMMAR_BYTES} bytes in all (the limit)")
    with grammar_budget():
        left: int = _budget.left
        try:
            gbnf = str(convert(text))
        except _OverBudget:
            raise over from None
        except MemoryError:
            raise SchemaError("size", "", "needs more memory than the server has to become a grammar") from None
        if len(gbnf) > left:  # the repetitions stopped the build early; the whole text is what is kept
            raise over
        _budget.left = left - len(gbnf)
    depth = group_depth(gbnf)
    if depth > MAX_GROUP_DEPTH:
        raise SchemaError("nesting", "", f"makes grammar groups nested {depth} deep; the limit is {MAX_GROUP_DEPTH}")
    return gbnf


def group_depth(gbnf: str) -> int:
    """The deepest nesting of parentheses in ``gbnf``, outside its literals, classes and comments."""
    deepest = depth = i = 0
    while i < len(gbnf):
        c = gbnf[i]
        if c in "\"[":
            end = "\"" if c == "\"" else "]"
            i += 1
            while i < len(gbnf) and gbnf[i] != end:
                i += 2 if gbnf[i] == "\\" else 1
        elif c == "#":
            while i < len(gbnf) and gbnf[i] != "\n":
                i += 1
        elif c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth -= 1
        i += 1
    return deepest
