"""Kimi K2 and K2-Thinking: ``<think>`` and a section of calls, each ``<|tool_call_begin|>functions.NAME:INDEX
<|tool_call_argument_begin|>{...}<|tool_call_end|>``, the model's ``functions.NAME:INDEX`` kept as the call's id."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import arguments_text
from engine.chat.family import CALL, CONTENT, THINKING, Family, ToolCall
from engine.chat.tagged import BlockReader, json_args_grammar, split_blocks, value_of

SECTION_OPEN, SECTION_CLOSE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
OPEN, ARGS, CLOSE = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
PREFIX = "functions."  # the namespace every call's id names its tool under
# A call's arguments run to its end marker, or (the model having left it out) to the next call or the reply's end.
_BLOCK = re.compile(r"<\|tool_call_begin\|>\s*((?:functions\.)?([^\s:<]+)(?::\d+)?)\s*<\|tool_call_argument_begin\|>"
                    r"(.*?)(?:<\|tool_call_end\|>|(?=<\|tool_call_begin\|>)|(?=<\|tool_calls_section_end\|>)|$)",
                    re.DOTALL)


def _read(names: Sequence[str]) -> BlockReader:
    def read(m: re.Match[str]) -> list[ToolCall] | None:
        call_id, name, body = m.group(1), m.group(2), m.group(3).strip()
        args = value_of(body) if body else {}
        if name not in names or not isinstance(args, dict):
            return None
        return [ToolCall(call_id, name, arguments_text(args))]
    return read


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    rest, calls = split_blocks(text, _BLOCK, _read(names))
    if calls:  # the section markers around parsed calls are markup
        rest = rest.replace(SECTION_OPEN, "").replace(SECTION_CLOSE, "").strip()
    return rest, calls


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    return json_args_grammar(tools, only, lambda name: f"{SECTION_OPEN}{OPEN}{PREFIX}{name}:0{ARGS}",
                             CLOSE + SECTION_CLOSE)


FAMILY = Family(
    name="kimi_k2",
    label="Kimi K2, K2-Thinking",
    signature=(SECTION_OPEN, ARGS),
    transitions={CONTENT: ((THINK_OPEN, THINKING), (SECTION_OPEN, CALL), (OPEN, CALL)),
                 THINKING: ((THINK_CLOSE, CONTENT),)},
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(SECTION_OPEN, OPEN),
    end_texts=("<|im_end|>",),
    preserved=(THINK_OPEN, THINK_CLOSE, SECTION_OPEN, SECTION_CLOSE, OPEN, ARGS, CLOSE),
    think_open=THINK_OPEN,
)
