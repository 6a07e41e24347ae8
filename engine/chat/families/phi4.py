"""Phi-4-mini: tools offered between ``<|tool|>`` and ``<|/tool|>``, and ``<|tool_call|>[{"name": ...,
"arguments": {...}}, ...]<|/tool_call|>`` (no Phi-4 template is among llama.cpp's: from Microsoft's published one)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import RULES, json_object_grammar, literal
from engine.chat.family import CALL, CONTENT, Family, ToolCall
from engine.chat.tagged import BlockReader, json_list_calls, split_blocks

OPEN, CLOSE = "<|tool_call|>", "<|/tool_call|>"
_BLOCK = re.compile(r"<\|tool_call\|>(.*?)(?:<\|/tool_call\|>|$)", re.DOTALL)


def _read(names: Sequence[str]) -> BlockReader:
    return lambda m: json_list_calls(m.group(1), names)


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    return split_blocks(text, _BLOCK, _read(names))


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    return f"root ::= {literal(OPEN + '[')} {RULES}root {literal(']' + CLOSE)}\n" + json_object_grammar(tools, only)


FAMILY = Family(
    name="phi4",
    label="Phi-4-mini",
    signature=("<|tool|>", "<|/tool|>"),
    transitions={CONTENT: ((OPEN, CALL),)},
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(OPEN,),
    end_texts=("<|end|>", "<|endoftext|>"),
    preserved=(OPEN, CLOSE),
)
