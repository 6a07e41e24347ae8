"""JSON grammars for constrained replies: any JSON object (``json_object``), or one JSON Schema (``json_schema``).

A schema becomes GBNF through llama.cpp's json-schema-to-grammar converter (llama-cpp-python's port of it). The
converter skips the keywords it does not know, which would let a reply break the schema while looking obeyed, so a
schema is walked first: a keyword the grammar cannot enforce (``multipleOf``, ``not``, ``uniqueItems``, a ``format``
it has no rule for, ...) is refused by name with where it sits. Bounds on numbers are written by
:mod:`~engine.core.schemarange`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from llama_cpp.llama_grammar import JSON_GBNF

from .schemabounds import SchemaError as SchemaError  # re-exported: callers catch it from here
from .schemabounds import build_under_budget, check_node, check_size
from .schemarange import check_bounds
from .schemarange import schema_to_gbnf as json_schema_to_gbnf  # the converter, with bounds on numbers

# llama.cpp decodes a grammar's text leniently: a lead byte 0xF5-0xFF starts a "character" past U+10FFFF, and
# 0xED 0xA0... a surrogate. A JSON string's character class excludes those too, so a reply is always valid UTF-8.
_INVALID = r"\uD800-\uDFFF\U00110000-\U003FFFFF"
_CLASSES = {  # a JSON string's unescaped characters, as json.gbnf and the converter write them
    r'[^"\\\x7F\x00-\x1F]': rf'[^"\\\x7F\x00-\x1F{_INVALID}]',
    r'[^"\\]': rf'[^"\\\x7F\x00-\x1F{_INVALID}]',  # also no raw control character: JSON forbids them
}


def valid_utf8(gbnf: str) -> str:
    """``gbnf`` with its JSON string characters held to valid Unicode scalar values."""
    for old, new in _CLASSES.items():
        gbnf = gbnf.replace(old, new)
    return gbnf


JSON_OBJECT_GRAMMAR = valid_utf8(JSON_GBNF)  # llama.cpp's grammars/json.gbnf: one JSON object, bounded whitespace

# Keywords that change which documents are valid and that the converter does not turn into grammar rules.
UNSUPPORTED = frozenset({
    "multipleOf", "not", "if", "then", "else",
    "patternProperties", "propertyNames", "uniqueItems", "contains", "minContains", "maxContains",
    "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
    "unevaluatedProperties", "unevaluatedItems", "contentEncoding", "contentMediaType", "$dynamicRef",
    "$recursiveRef",
})
FORMATS = frozenset({"date", "time", "date-time", "uuid", "uuid1", "uuid2", "uuid3", "uuid4", "uuid5"})
_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_SUBSCHEMA = ("items", "additionalProperties", "additionalItems")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions")


def schema_grammar(schema: Any) -> str:
    """GBNF for ``schema``. Always strict: an object allows no property its schema does not list unless
    ``additionalProperties`` asks, and every listed type, enum, const, pattern and length is enforced. A schema
    past the bounds of :mod:`~engine.core.schemabounds` is refused before its grammar is built."""
    if not isinstance(schema, dict):
        raise SchemaError("root", "", "must be a JSON object")
    check_size(schema)
    for where, node in _walk(schema, ""):
        _check(node, where)
        check_node(node, where)
        check_bounds(node, where)
    try:
        gbnf = build_under_budget(json_schema_to_gbnf, json.dumps(schema))
    except SchemaError:
        raise
    except RecursionError:
        raise SchemaError("$ref", "", "nests too deeply to be turned into a grammar") from None
    except Exception as e:  # the converter's own refusals: AssertionError, KeyError, ValueError on a pattern, ...
        raise SchemaError("structure", "", f"cannot be turned into a grammar: {str(e) or type(e).__name__}") from None
    return valid_utf8(gbnf)


def _walk(node: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if not isinstance(node, dict):
        return
    yield where, node
    for key in _SUBSCHEMA:
        if isinstance(node.get(key), dict):
            yield from _walk(node[key], f"{where}.{key}".lstrip("."))
    for key in _SUBSCHEMA_LISTS:
        if isinstance(node.get(key), list):
            for i, sub in enumerate(node[key]):
                yield from _walk(sub, f"{where}.{key}[{i}]".lstrip("."))
    for key in _SUBSCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            for name, sub in node[key].items():
                yield from _walk(sub, f"{where}.{key}.{name}".lstrip("."))


def _check(node: dict[str, Any], where: str) -> None:
    for key in node:
        if key in UNSUPPORTED:
            raise SchemaError(f"'{key}'", where, "cannot be enforced by the grammar; remove it from the schema")
    fmt = node.get("format")
    if fmt is not None and fmt not in FORMATS:
        raise SchemaError(f"format '{fmt}'", where, f"has no grammar rule (supported: {', '.join(sorted(FORMATS))})")
    types = node.get("type", [])
    for t in types if isinstance(types, list) else [types]:
        if t not in _TYPES:
            raise SchemaError(f"type {t!r}", where, "is not a JSON Schema type")
    ref = node.get("$ref")
    if isinstance(ref, str) and not ref.startswith("#"):
        raise SchemaError(f"$ref '{ref}'", where, "points outside the schema (only local '#/...' references)")
    if "allOf" in node and not all(isinstance(s, dict) and ("properties" in s or "$ref" in s or "anyOf" in s)
                                   for s in node["allOf"]):
        raise SchemaError("'allOf'", where, "is supported only as a merge of object schemas")
