"""Nemotron Nano v2: thinking that the prompt opens (``<think>``), and ``<TOOLCALL>[{"name": ..., "arguments":
{...}}, ...]</TOOLCALL>``, all of a turn's calls in one list (Nemotron 3 writes Qwen3-Coder's calls: not this)."""

from __future__ import annotations

from engine.chat.family import CALL, CONTENT, THINKING, Family
from engine.chat.tagged import listed_calls

OPEN, CLOSE = "<TOOLCALL>", "</TOOLCALL>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
parse_calls, call_grammar = listed_calls(OPEN, CLOSE)


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
