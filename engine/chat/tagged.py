"""Pieces shared by the families whose calls are markup around a name and arguments: a held section's blocks, values
read as JSON where they parse, and the grammar of one call whose argument values follow the tool's schema."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.chat.calls import RULES, arguments_text, json_call, json_object_grammar, literal, offered
from engine.chat.family import CallGrammar, CallParser, ToolCall
from engine.core.gbnf import prefixed
from engine.core.jsonschema import schema_grammar

RAW_TEXT = "[^<]*"  # a string argument written bare: anything up to the next tag
BlockReader = Callable[[re.Match[str]], list[ToolCall] | None]
"""One block's match -> its calls (None: the block is not a call of an offered tool, and stays text)."""


def split_blocks(text: str, pattern: re.Pattern[str], read: BlockReader) -> tuple[str, list[ToolCall]]:
    """Every block of ``pattern`` in ``text`` read as calls; the text outside the blocks read, joined, stays text."""
    calls: list[ToolCall] = []
    kept: list[str] = []
    pos = 0
    for m in pattern.finditer(text):
        found = read(m)
        if found is not None:
            kept.append(text[pos:m.start()])
            pos = m.end()
            calls.extend(found)
    kept.append(text[pos:])
    return "".join(kept).strip(), calls


def value_of(text: str) -> Any:
    """A tagged argument's value: JSON where it parses as JSON, else the text itself (one newline each side being the
    markup's)."""
    text = text.removeprefix("\n").removesuffix("\n")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _value_rule(schema: Any, prefix: str, raw_strings: bool, quote: str) -> tuple[str, str]:
    """(the rule a value is written as, the rules it needs)."""
    if raw_strings and isinstance(schema, Mapping) and schema.get("type") == "string" and "enum" not in schema:
        q = literal(quote) if quote else ""
        return f"{prefix}raw", f"{prefix}raw ::= {q} {RAW_TEXT} {q}\n"
    return f"{prefix}root", prefixed(schema_grammar(schema), prefix)


def tagged_grammar(tools: Sequence[Mapping[str, Any]], only: str | None, head: Callable[[str], str],
                   arg: Callable[[str], tuple[str, str]], tail: str, raw_strings: bool = True,
                   quote: str = "") -> str:
    """GBNF (root ``root``) for one call written ``head(name)``, then each argument as ``open`` value ``close`` (from
    ``arg(key)``: the required in the schema's order, each optional one maybe), then ``tail``. String arguments are
    bare text where ``raw_strings`` (between two ``quote``s where it is given); every other value is JSON of its
    schema."""
    alts: list[str] = []
    body: list[str] = []
    for i, (name, params) in enumerate(offered(tools, only)):
        props: Mapping[str, Any] = params.get("properties") or {}
        required = set(params.get("required") or ())
        parts = [literal(head(name))]
        for j, (key, schema) in enumerate(props.items()):
            rule, needs = _value_rule(schema, f"{RULES}{i}-{j}-", raw_strings, quote)
            body.append(needs)
            open_, close = arg(key)
            part = f"{literal(open_)} {rule} {literal(close)}"
            parts.append(part if key in required else f"( {part} )?")
        parts.append(literal(tail))
        alts.append(" ".join(parts))
    return "root ::= " + " | ".join(f"( {a} )" for a in alts) + "\n" + "\n".join(b.strip() for b in body) + "\n"


def json_args_grammar(tools: Sequence[Mapping[str, Any]], only: str | None, head: Callable[[str], str],
                      tail: str) -> str:
    """GBNF (root ``root``) for one call: ``head(name)``, the arguments as JSON of the tool's schema, ``tail``."""
    alts: list[str] = []
    body: list[str] = []
    for i, (name, params) in enumerate(offered(tools, only)):
        prefix = f"{RULES}{i}-"
        body.append(prefixed(schema_grammar(params), prefix).strip())
        alts.append(f"{literal(head(name))} {prefix}root" + (f" {literal(tail)}" if tail else ""))
    return "root ::= " + " | ".join(f"( {a} )" for a in alts) + "\n" + "\n".join(body) + "\n"


def json_list_calls(body: str, names: Sequence[str]) -> list[ToolCall] | None:
    """``[{"name": ..., "arguments": {...}}, ...]`` (or one such object) as calls of offered tools; None where any
    item is not one."""
    try:
        items = json.loads(body)
    except json.JSONDecodeError:
        return None
    calls = [json_call(json.dumps(item), names) for item in (items if isinstance(items, list) else [items])]
    good = [c for c in calls if c is not None]
    return good if good and len(good) == len(calls) else None


def listed_calls(open_: str, close: str) -> tuple[CallParser, CallGrammar]:
    """The parser and grammar of a format that writes a turn's calls as one JSON list between ``open_`` and
    ``close`` (Nemotron's ``<TOOLCALL>``, Phi-4's ``<|tool_call|>``)."""
    block = re.compile(re.escape(open_) + r"(.*?)(?:" + re.escape(close) + r"|$)", re.DOTALL)

    def parse(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
        return split_blocks(text, block, lambda m: json_list_calls(m.group(1), names))

    def grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
        root = f"root ::= {literal(open_ + '[')} {RULES}root {literal(']' + close)}"
        return root + "\n" + json_object_grammar(tools, only)

    return parse, grammar


_DECODER = json.JSONDecoder()


def leading_calls(seg: str, names: Sequence[str], keys: Sequence[str],
                  call_id: Callable[[dict[str, Any]], str]) -> tuple[list[ToolCall], str] | None:
    """A JSON list of calls (or one call) at the start of ``seg`` and the text after it; the arguments under the
    first of ``keys`` present, the id from ``call_id(item)``. None unless every item is a call of an offered tool
    (a list with anything else stays text, whole)."""
    try:
        obj, end = _DECODER.raw_decode(seg.lstrip())
    except json.JSONDecodeError:
        return None
    calls = []
    for item in obj if isinstance(obj, list) else [obj]:
        if not isinstance(item, dict) or item.get("name") not in names:
            return None
        args: Any = next((item[k] for k in keys if k in item), {})
        calls.append(ToolCall(call_id(item), item["name"], arguments_text(args)))
    return calls, seg.lstrip()[end:]
