"""DeepSeek V3.1: thinking switched by the template's ``thinking`` variable and ended by ``</think>``, calls
``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>``."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import named_calls_grammar
from engine.chat.family import CALL, CONTENT, THINKING, Family, ToolCall

from .deepseek_r1 import CALL_CLOSE, CALL_OPEN, CALLS_CLOSE, CALLS_OPEN, END, SEP, THINK_CLOSE, THINK_OPEN, call_blocks

NO_THINKING = THINK_OPEN + THINK_CLOSE  # the prompt's empty block when thinking is off: V3.1's, not R1's
_CALL = re.compile(r"<｜tool▁call▁begin｜>\s*([^<\s]+?)\s*<｜tool▁sep｜>\s*(\{.*?\})\s*(?:<｜tool▁call▁end｜>|$)",
                   re.DOTALL)


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    return call_blocks(text, names, _CALL)


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    return named_calls_grammar(tools, only, lambda name: f"{CALLS_OPEN}{CALL_OPEN}{name}{SEP}",
                               f"{CALL_CLOSE}{CALLS_CLOSE}")


FAMILY = Family(
    name="deepseek_v31",
    label="DeepSeek V3.1",
    signature=(CALLS_OPEN, SEP, NO_THINKING),
    transitions={
        CONTENT: ((THINK_OPEN, THINKING), (CALLS_OPEN, CALL), (CALL_OPEN, CALL)),
        THINKING: ((THINK_CLOSE, CONTENT),),
    },
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(CALLS_OPEN,),
    end_texts=(END,),
    preserved=(THINK_OPEN, THINK_CLOSE, CALLS_OPEN, CALLS_CLOSE, CALL_OPEN, CALL_CLOSE, SEP),
    thinking_key="thinking",
    think_open=THINK_OPEN,
)
