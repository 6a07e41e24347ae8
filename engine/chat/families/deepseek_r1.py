"""DeepSeek R1 and its distills (and V3): ``<think>...</think>``, opened by the prompt in most templates, and calls
``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{...}\\n```<｜tool▁call▁end｜>
...<｜tool▁calls▁end｜>``."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import arguments_text, named_calls_grammar, new_call_id
from engine.chat.family import CALL, CONTENT, THINKING, Family, ToolCall
from engine.chat.tagged import split_blocks

CALLS_OPEN, CALLS_CLOSE = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_OPEN, CALL_CLOSE, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
END = "<｜end▁of▁sentence｜>"
_CALL = re.compile(
    r"<｜tool▁call▁begin｜>\s*(?:\w+\s*)?<｜tool▁sep｜>\s*([^\n`<]+?)\s*```(?:json)?\s*(.*?)\s*```\s*"
    r"(?:<｜tool▁call▁end｜>|$)", re.DOTALL)


def call_blocks(text: str, names: Sequence[str], pattern: re.Pattern[str]) -> tuple[str, list[ToolCall]]:
    """Each ``pattern`` match (group 1 the name, group 2 the JSON arguments) of an offered tool as a call; the
    calls' wrapper markers go with them, a block naming no offered tool stays text."""
    rest, calls = split_blocks(text, pattern, lambda m: _call(m, names))
    if calls:
        rest = rest.replace(CALLS_OPEN, "").replace(CALLS_CLOSE, "").strip()
    return rest, calls


def _call(m: re.Match[str], names: Sequence[str]) -> list[ToolCall] | None:
    try:
        args = json.loads(m.group(2))
    except json.JSONDecodeError:
        return None
    if m.group(1) not in names or not isinstance(args, dict):
        return None
    return [ToolCall(new_call_id(), m.group(1), arguments_text(args))]


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    return call_blocks(text, names, _CALL)


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    return named_calls_grammar(tools, only, lambda name: f"{CALLS_OPEN}{CALL_OPEN}function{SEP}{name}\n```json\n",
                               f"\n```{CALL_CLOSE}{CALLS_CLOSE}")


FAMILY = Family(
    name="deepseek_r1",
    label="DeepSeek R1, R1 distills, V3",
    signature=(CALLS_OPEN, SEP),
    transitions={
        CONTENT: ((THINK_OPEN, THINKING), (CALLS_OPEN, CALL), (CALL_OPEN, CALL)),
        THINKING: ((THINK_CLOSE, CONTENT),),
    },
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(CALLS_OPEN,),
    end_texts=(END,),
    preserved=(THINK_OPEN, THINK_CLOSE, CALLS_OPEN, CALLS_CLOSE, CALL_OPEN, CALL_CLOSE, SEP),
    thinking_key="enable_thinking",
    think_open=THINK_OPEN,
)
