"""LFM2 and LFM2.5: ``<think>`` where the model writes it, and ``<|tool_call_start|>[name(a=1, b="x")]
<|tool_call_end|>``, a pythonic list of calls (read with :mod:`ast`, literals only)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.family import CALL, CONTENT, THINKING, Family, ToolCall
from engine.chat.pythonic import call_list
from engine.chat.tagged import BlockReader, split_blocks, tagged_grammar

OPEN, CLOSE = "<|tool_call_start|>", "<|tool_call_end|>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_BLOCK = re.compile(r"<\|tool_call_start\|>(.*?)(?:<\|tool_call_end\|>|$)", re.DOTALL)


def _read(names: Sequence[str]) -> BlockReader:
    def read(m: re.Match[str]) -> list[ToolCall] | None:
        return call_list(m.group(1), list(names))
    return read


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    return split_blocks(text, _BLOCK, _read(names))


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    # Each argument is written ``key=JSON, `` (a call may end in a comma in Python); JSON's literals are read too.
    return tagged_grammar(tools, only, lambda name: f"{OPEN}[{name}(", lambda key: (f"{key}=", ", "), f")]{CLOSE}",
                          raw_strings=False)


FAMILY = Family(
    name="lfm2",
    label="LFM2, LFM2.5",
    signature=("List of tools: ",),
    transitions={CONTENT: ((THINK_OPEN, THINKING), (OPEN, CALL)), THINKING: ((THINK_CLOSE, CONTENT),)},
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(OPEN,),
    end_texts=("<|im_end|>",),
    preserved=(THINK_OPEN, THINK_CLOSE, OPEN, CLOSE),
)
