"""MiniMax M2: thinking that the prompt opens (``<think>``), and ``<minimax:tool_call>`` blocks of ``<invoke
name="NAME"><parameter name="K">V</parameter></invoke>`` calls, a value read as JSON where it parses."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import arguments_text, new_call_id
from engine.chat.family import CALL, CONTENT, THINKING, Family, ToolCall
from engine.chat.tagged import BlockReader, split_blocks, tagged_grammar, value_of

OPEN, CLOSE = "<minimax:tool_call>", "</minimax:tool_call>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_BLOCK = re.compile(r"<minimax:tool_call>(.*?)(?:</minimax:tool_call>|$)", re.DOTALL)
_INVOKE = re.compile(r"<invoke\s+name=\"([^\"]+)\"\s*>(.*?)(?:</invoke>|$)", re.DOTALL)
_PARAM = re.compile(r"<parameter\s+name=\"([^\"]+)\"\s*>(.*?)</parameter>", re.DOTALL)


def _read(names: Sequence[str]) -> BlockReader:
    def read(m: re.Match[str]) -> list[ToolCall] | None:
        # A block is calls only: one invoke of a tool not offered, or text between invokes, leaves it all text.
        if _INVOKE.sub("", m.group(1)).strip():
            return None
        calls = []
        for name, body in _INVOKE.findall(m.group(1)):
            if name not in names or _PARAM.sub("", body).strip():
                return None
            args = {k: value_of(v) for k, v in _PARAM.findall(body)}
            calls.append(ToolCall(new_call_id(), name, arguments_text(args)))
        return calls or None
    return read


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    return split_blocks(text, _BLOCK, _read(names))


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    return tagged_grammar(tools, only, lambda name: f'{OPEN}\n<invoke name="{name}">\n',
                          lambda key: (f'<parameter name="{key}">', "</parameter>\n"), f"</invoke>\n{CLOSE}")


FAMILY = Family(
    name="minimax",
    label="MiniMax M2",
    signature=(OPEN,),
    transitions={CONTENT: ((THINK_OPEN, THINKING), (OPEN, CALL)), THINKING: ((THINK_CLOSE, CONTENT),)},
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(OPEN,),
    end_texts=("[e~[",),
    preserved=(THINK_OPEN, THINK_CLOSE, OPEN, CLOSE),
    think_open=THINK_OPEN,
)
