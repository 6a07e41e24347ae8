"""Phi-4-mini: tools offered between ``<|tool|>`` and ``<|/tool|>``, and ``<|tool_call|>[{"name": ...,
"arguments": {...}}, ...]<|/tool_call|>`` (no Phi-4 template is among llama.cpp's: from Microsoft's published one)."""

from __future__ import annotations

from engine.chat.family import CALL, CONTENT, Family
from engine.chat.tagged import listed_calls

OPEN, CLOSE = "<|tool_call|>", "<|/tool_call|>"
parse_calls, call_grammar = listed_calls(OPEN, CLOSE)


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
