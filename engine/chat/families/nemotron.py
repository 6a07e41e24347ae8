"""Nemotron Nano v2: thinking that the prompt opens (``<think>``), and ``<TOOLCALL>[{"name": ..., "arguments":
{...}}, ...]</TOOLCALL>``, all of a turn's calls in one list (Nemotron 3 writes Qwen3-Coder's calls: not this)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import RULES, json_object_grammar, literal
from engine.chat.family import CALL, CONTENT, THINKING, Family, ToolCall
from engine.chat.tagged import BlockReader, json_list_calls, split_blocks

OPEN, CLOSE = "<TOOLCALL>", "</TOOLCALL>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_BLOCK = re.compile(r"<TOOLCALL>(.*?)(?:</TOOLCALL>|$)", re.DOTALL)


def _read(names: Sequence[str]) -> BlockReader:
    return lambda m: json_list_calls(m.group(1), names)


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    return split_blocks(text, _BLOCK, _read(names))


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    return f"root ::= {literal(OPEN + '[')} {RULES}root {literal(']' + CLOSE)}\n" + json_object_grammar(tools, only)


FAMILY = Family(
    name="nemotron",
    label="Nemotron Nano v2",
    signature=(OPEN, THINK_OPEN),
    transitions={CONTENT: ((THINK_OPEN, THINKING), (OPEN, CALL)), THINKING: ((THINK_CLOSE, CONTENT),)},
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(OPEN,),
    end_texts=("<SPECIAL_12>", "<SPECIAL_11>"),  # the template's end of turn and next role's header
    preserved=(THINK_OPEN, THINK_CLOSE, OPEN, CLOSE),
    thinking_key="enable_thinking",
    think_open=THINK_OPEN,
)
