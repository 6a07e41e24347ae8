"""GLM-4.5/4.6/4.7 (and Ling 3, Laguna, Spark, which write the same calls): ``<think>`` and ``<tool_call>NAME
<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>``, a value read as JSON where it parses, else as text."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import arguments_text, new_call_id
from engine.chat.family import CALL, CONTENT, THINKING, Family, ToolCall
from engine.chat.tagged import BlockReader, split_blocks, tagged_grammar, value_of

OPEN, CLOSE = "<tool_call>", "</tool_call>"
KEY_OPEN, KEY_CLOSE, VALUE_OPEN, VALUE_CLOSE = "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# A block runs to its close, or to the reply's end where the turn ended inside it; its name is the text before the
# first argument (or the close).
_BLOCK = re.compile(r"<tool_call>\s*([^<\s]+)\s*(.*?)(?:</tool_call>|$)", re.DOTALL)
_ARG = re.compile(r"<arg_key>\s*(.*?)\s*</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)


def _read(names: Sequence[str]) -> BlockReader:
    def read(m: re.Match[str]) -> list[ToolCall] | None:
        name, body = m.group(1), m.group(2)
        if name not in names or _ARG.sub("", body).strip():
            return None
        args = {k: value_of(v) for k, v in _ARG.findall(body)}
        return [ToolCall(new_call_id(), name, arguments_text(args))]
    return read


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    return split_blocks(text, _BLOCK, _read(names))


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    return tagged_grammar(tools, only, lambda name: f"{OPEN}{name}\n",
                          lambda key: (f"{KEY_OPEN}{key}{KEY_CLOSE}\n{VALUE_OPEN}", f"{VALUE_CLOSE}\n"), CLOSE)


FAMILY = Family(
    name="glm45",
    label="GLM-4.5, 4.6, 4.7, Ling 3, Laguna, Spark",
    signature=(KEY_OPEN, VALUE_OPEN),
    transitions={CONTENT: ((THINK_OPEN, THINKING), (OPEN, CALL)), THINKING: ((THINK_CLOSE, CONTENT),)},
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(OPEN,),
    # GLM's turn ends at the next role token; Ling's, Laguna's and Spark's at their own end of turn.
    end_texts=("<|user|>", "<|observation|>", "<|endoftext|>", "<|role_end|>", "</assistant>",
               "<｜end▁of▁sentence｜>"),
    preserved=(THINK_OPEN, THINK_CLOSE, OPEN, CLOSE, KEY_OPEN, KEY_CLOSE, VALUE_OPEN, VALUE_CLOSE),
    thinking_key="enable_thinking",
    think_open=THINK_OPEN,
)
