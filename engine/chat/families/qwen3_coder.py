"""Qwen3-Coder, Qwen3.5, Nemotron 3 and Step 3.5: ``<think>...</think>`` and XML calls, one block per call:
``<tool_call>\\n<function=NAME>\\n<parameter=ARG>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>``."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import RULES, literal, new_call_id, offered
from engine.chat.family import CALL, CONTENT, THINKING, Family, ToolCall
from engine.chat.tagged import split_blocks
from engine.core.gbnf import prefixed
from engine.core.jsonschema import schema_grammar

OPEN, CLOSE = "<tool_call>", "</tool_call>"
FN_OPEN, FN_CLOSE = "<function=", "</function>"  # some models skip <tool_call> and open the first call here
PARAM_CLOSE = "</parameter>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
THINK_CALL = OPEN + "\n" + FN_OPEN  # a call ends a thinking block the model left open (Qwen3.5 does)
_BLOCK = re.compile(r"(?:<tool_call>\s*)?<function=([^>\n]+)>(.*?)(?:</function>\s*(?:</tool_call>)?|$)", re.DOTALL)
# A value sits between the newline after its opening tag and the one before its closing tag: exactly one newline
# each side belongs to the markup, so a value's own leading indent or trailing newline is kept.
_PARAM = re.compile(r"<parameter=([^>\n]+)>\n?(.*?)(?:\n?</parameter>|(?=<parameter=)|$)", re.DOTALL)
_RAW = f"{RULES}raw"
RAW_RULE = f'{_RAW} ::= ([^<] | "<" [^/])*'  # a string value written bare: anything but a closing tag


def _value(text: str) -> Any:
    """The schema is not the parser's: a value that parses as JSON is that JSON, any other is the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _call(m: re.Match[str], names: Sequence[str]) -> ToolCall | None:
    name = m.group(1).strip()
    if name not in names:
        return None
    args = {p.group(1).strip(): _value(p.group(2)) for p in _PARAM.finditer(m.group(2))}
    return ToolCall(new_call_id(), name, json.dumps(args, ensure_ascii=False))


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    return split_blocks(text, _BLOCK, lambda m: [c] if (c := _call(m, names)) is not None else None)


def _is_text(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    free = "enum" not in schema and "const" not in schema  # a value from a list is written as one of them
    return free and (kind is None or kind == "string" or (isinstance(kind, list) and "string" in kind))


def _choices(schema: Mapping[str, Any]) -> str | None:
    """The rule of an enum (or const) of strings, written bare as the XML form writes text; None for other kinds."""
    values = schema.get("enum", [schema["const"]] if "const" in schema else None)
    if not values or not all(isinstance(v, str) for v in values):
        return None
    return "( " + " | ".join(literal(v) for v in values) + " )"


def _params(i: int, params: Mapping[str, Any]) -> tuple[str, list[str]]:
    """One tool's parameters in its declared order (the required ones always, the rest optional) and their rules."""
    required = set(params.get("required") or ())
    items, rules = [], []
    for j, (arg, schema) in enumerate((params.get("properties") or {}).items()):
        choices = _choices(schema)
        if choices is not None:
            value = choices
        elif _is_text(schema):
            value = _RAW
        else:
            pre = f"{RULES}{i}-{j}-"
            value = f"{pre}root"
            rules.append(prefixed(schema_grammar(schema), pre))
        item = f"{literal(f'<parameter={arg}>' + chr(10))} {value} {literal(chr(10) + PARAM_CLOSE + chr(10))}"
        items.append(item if arg in required else f"({item})?")
    return " ".join(items), rules


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    alts, rules = [], [RAW_RULE]
    for i, (name, params) in enumerate(offered(tools, only)):
        body, more = _params(i, params)
        head = literal(f"{OPEN}\n{FN_OPEN}{name}>\n")
        alts.append(" ".join(x for x in (head, body, literal(f"{FN_CLOSE}\n{CLOSE}")) if x))
        rules += more
    return "\n".join(["root ::= " + " | ".join(alts), *rules])


FAMILY = Family(
    name="qwen3_coder",
    label="Qwen3-Coder, Qwen3.5, Nemotron 3, Step 3.5",
    signature=(OPEN, FN_OPEN, "<parameter="),
    transitions={
        CONTENT: ((THINK_OPEN, THINKING), (OPEN, CALL), (FN_OPEN, CALL)),
        THINKING: ((THINK_CLOSE, CONTENT), (THINK_CALL, CALL)),
    },
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(OPEN, FN_OPEN),
    end_texts=("<|im_end|>", "<|endoftext|>"),
    preserved=(THINK_OPEN, THINK_CLOSE, OPEN, CLOSE, FN_OPEN, FN_CLOSE),
    thinking_key="enable_thinking",
    think_open=THINK_OPEN,
)
