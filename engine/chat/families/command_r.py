"""Command R7B and Cohere2 (North): ``<|START_THINKING|>...<|END_THINKING|>``, the answer in
``<|START_RESPONSE|>...<|END_RESPONSE|>`` (``<|START_TEXT|>...<|END_TEXT|>`` in Cohere2), calls
``<|START_ACTION|>[{"tool_call_id": ..., "tool_name": ..., "parameters": {...}}, ...]<|END_ACTION|>``."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import RULES, arguments_text, literal, new_call_id, offered
from engine.chat.family import CALL, CONTENT, THINKING, Family, ToolCall
from engine.core.gbnf import prefixed
from engine.core.jsonschema import schema_grammar

ACTION_OPEN, ACTION_CLOSE = "<|START_ACTION|>", "<|END_ACTION|>"
THINK_OPEN, THINK_CLOSE = "<|START_THINKING|>", "<|END_THINKING|>"
ANSWER_MARKS = ("<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>")  # around the answer
_BLOCK = re.compile(r"<\|START_ACTION\|>\s*(.*?)\s*(?:<\|END_ACTION\|>|$)", re.DOTALL)


def _block(body: str, names: Sequence[str]) -> list[ToolCall] | None:
    """A block's calls; None unless every item is a call of an offered tool. The model numbers its calls from 0
    in every turn, so each gets a fresh id instead."""
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return None
    calls = []
    for item in obj if isinstance(obj, list) else [obj]:
        if not isinstance(item, dict) or item.get("tool_name") not in names:
            return None
        calls.append(ToolCall(new_call_id(), item["tool_name"], arguments_text(item.get("parameters", {}))))
    return calls


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    calls: list[ToolCall] = []
    kept: list[str] = []
    pos = 0
    for m in _BLOCK.finditer(text):
        found = _block(m.group(1), names)
        if found is not None:
            kept.append(text[pos:m.start()])
            pos = m.end()
            calls += found
    kept.append(text[pos:])
    return "".join(kept).strip(), calls


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    alts = [{"type": "object", "properties": {"tool_call_id": {"const": "0"}, "tool_name": {"const": name},
                                              "parameters": params},
             "required": ["tool_call_id", "tool_name", "parameters"], "additionalProperties": False}
            for name, params in offered(tools, only)]
    item = prefixed(schema_grammar(alts[0] if len(alts) == 1 else {"anyOf": alts}), RULES)
    return f"root ::= {literal(ACTION_OPEN + '[' + chr(10))} {RULES}root {literal(chr(10) + ']' + ACTION_CLOSE)}\n" \
        + item


FAMILY = Family(
    name="command_r",
    label="Command R7B, Cohere2",
    signature=(ACTION_OPEN, THINK_OPEN),
    transitions={
        CONTENT: ((THINK_OPEN, THINKING), *((m, CONTENT) for m in ANSWER_MARKS), (ACTION_OPEN, CALL)),
        THINKING: ((THINK_CLOSE, CONTENT),),
    },
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(ACTION_OPEN,),
    end_texts=("<|END_OF_TURN_TOKEN|>",),
    preserved=(THINK_OPEN, THINK_CLOSE, ACTION_OPEN, ACTION_CLOSE, *ANSWER_MARKS),
    thinking_key="enable_thinking",
    effort_key="reasoning_effort",
    think_open=THINK_OPEN,
)
