"""Hermes / Qwen 2.5 and Qwen 3: ``<think>...</think>`` and ``<tool_call>{"name": ..., "arguments": {...}}
</tool_call>``, one block per call (the reference family: read it to write another)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import RULES, json_call, json_object_grammar, literal
from engine.chat.family import CALL, CONTENT, THINKING, Family, ToolCall
from engine.chat.tagged import split_blocks

OPEN, CLOSE = "<tool_call>", "</tool_call>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    return split_blocks(text, _BLOCK, lambda m: [c] if (c := json_call(m.group(1), names)) is not None else None)


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    return f"root ::= {literal(OPEN + chr(10))} {RULES}root {literal(chr(10) + CLOSE)}\n" \
        + json_object_grammar(tools, only)


FAMILY = Family(
    name="hermes",
    label="Hermes, Qwen 2.5, Qwen 3, QwQ",
    signature=(OPEN,),
    transitions={CONTENT: ((THINK_OPEN, THINKING), (OPEN, CALL)), THINKING: ((THINK_CLOSE, CONTENT),)},
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(OPEN,),
    end_texts=("<|im_end|>", "<|endoftext|>"),
    preserved=(THINK_OPEN, THINK_CLOSE, OPEN, CLOSE),
    thinking_key="enable_thinking",
    think_open=THINK_OPEN,
)
