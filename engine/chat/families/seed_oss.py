"""ByteDance Seed-OSS: ``<seed:think>`` and ``<seed:tool_call><function=NAME><parameter=K>V</parameter></function>
</seed:tool_call>``, one block per call, a value read as JSON where it parses."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import arguments_text, new_call_id
from engine.chat.family import CALL, CONTENT, THINKING, Family, ToolCall
from engine.chat.tagged import BlockReader, split_blocks, tagged_grammar, value_of

OPEN, CLOSE = "<seed:tool_call>", "</seed:tool_call>"
THINK_OPEN, THINK_CLOSE = "<seed:think>", "</seed:think>"
_BLOCK = re.compile(r"<seed:tool_call>\s*<function=([^>\s]+)>(.*?)(?:</function>\s*)?(?:</seed:tool_call>|$)",
                    re.DOTALL)
_PARAM = re.compile(r"<parameter=([^>\s]+)>(.*?)</parameter>", re.DOTALL)


def _read(names: Sequence[str]) -> BlockReader:
    def read(m: re.Match[str]) -> list[ToolCall] | None:
        name, body = m.group(1), m.group(2)
        if name not in names or _PARAM.sub("", body).replace("</function>", "").strip():
            return None
        args = {k: value_of(v) for k, v in _PARAM.findall(body)}
        return [ToolCall(new_call_id(), name, arguments_text(args))]
    return read


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    return split_blocks(text, _BLOCK, _read(names))


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    return tagged_grammar(tools, only, lambda name: f"{OPEN}\n<function={name}>\n",
                          lambda key: (f"<parameter={key}>", "</parameter>\n"), f"</function>\n{CLOSE}")


FAMILY = Family(
    name="seed_oss",
    label="Seed-OSS",
    signature=(OPEN, THINK_OPEN),
    transitions={CONTENT: ((THINK_OPEN, THINKING), (OPEN, CALL)), THINKING: ((THINK_CLOSE, CONTENT),)},
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(OPEN,),
    end_texts=("<seed:eos>",),
    preserved=(THINK_OPEN, THINK_CLOSE, OPEN, CLOSE),
    think_open=THINK_OPEN,
)
