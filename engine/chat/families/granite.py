"""IBM Granite 3.x and 4.x: 3.x calls ``<|tool_call|>[{"name": ..., "arguments": {...}}, ...]`` and (3.3) thinks
in ``<think>...</think><response>...</response>``; 4.x calls as Hermes does, ``<tool_call>{...}</tool_call>``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import RULES, json_object_grammar, literal, new_call_id
from engine.chat.family import CALL, CONTENT, THINKING, Family, ToolCall
from engine.chat.tagged import leading_calls
from engine.core.gbnf import either

from . import hermes

LIST_OPEN = "<|tool_call|>"  # 3.x: a JSON list of calls follows
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
RESPONSE_OPEN, RESPONSE_CLOSE = "<response>", "</response>"  # 3.3 wraps the answer after thinking


def _listed(seg: str, names: Sequence[str]) -> tuple[list[ToolCall], str] | None:
    """A JSON list of calls (or one call) at the start of ``seg`` and the text after it (fresh call ids)."""
    return leading_calls(seg, names, ("arguments",), lambda item: new_call_id())


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    head, *segs = text.split(LIST_OPEN)
    calls: list[ToolCall] = []
    kept = [head]
    for seg in segs:
        found = _listed(seg, names)
        if found is None:
            kept.append(LIST_OPEN + seg)
        else:
            calls += found[0]
            kept.append(found[1])
    rest, tagged = hermes.parse_calls("".join(kept), names)  # 4.x's blocks, wherever they are
    return rest, calls + tagged


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    """Either generation's form: the model writes the one it was trained on."""
    listed = f"root ::= {literal(LIST_OPEN + '[')} {RULES}root {literal(']')}\n" + json_object_grammar(tools, only)
    return either(listed, hermes.call_grammar(tools, only))


FAMILY = Family(
    name="granite",
    label="IBM Granite 3.x, 4.x",
    signature=("<|start_of_role|>",),
    transitions={
        CONTENT: ((THINK_OPEN, THINKING), (RESPONSE_OPEN, CONTENT), (RESPONSE_CLOSE, CONTENT), (LIST_OPEN, CALL),
                  (hermes.OPEN, CALL)),
        THINKING: ((THINK_CLOSE, CONTENT),),
    },
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(LIST_OPEN, hermes.OPEN),
    end_texts=("<|end_of_text|>",),
    preserved=(LIST_OPEN, hermes.OPEN, hermes.CLOSE, THINK_OPEN, THINK_CLOSE, RESPONSE_OPEN, RESPONSE_CLOSE),
    thinking_key="thinking",
    think_open=THINK_OPEN,
)
