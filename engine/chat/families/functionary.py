"""Functionary v3.1: ``<function=NAME>{...}</function>`` per call, and ``<|python_tag|>`` before code for the
``python`` tool (v3.2's ``>>>NAME`` form is :mod:`.functionary_v32`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import arguments_text, new_call_id
from engine.chat.family import CALL, CONTENT, Family, ToolCall
from engine.chat.tagged import BlockReader, json_args_grammar, split_blocks

OPEN, CLOSE, PYTHON_TAG = "<function=", "</function>", "<|python_tag|>"
PYTHON = "python"  # the code tool: its call is bare code, its arguments {"code": ...}
_BLOCK = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|$)|<\|python_tag\|>(.*)$", re.DOTALL)


def call_of(name: str, body: str, names: Sequence[str]) -> ToolCall | None:
    """A call of ``name`` with ``body`` as its JSON arguments (bare code for the python tool), if it is one."""
    if name not in names:
        return None
    try:
        args = json.loads(body) if body.strip() else {}
    except json.JSONDecodeError:
        if name != PYTHON:
            return None
        args = {"code": body.strip()}
    if not isinstance(args, dict):
        return None
    return ToolCall(new_call_id(), name, arguments_text(args))


def _read(names: Sequence[str]) -> BlockReader:
    def read(m: re.Match[str]) -> list[ToolCall] | None:
        if m.group(3) is not None:
            call = call_of(PYTHON, m.group(3), names)
        else:
            call = call_of(m.group(1), m.group(2), names)
        return None if call is None else [call]
    return read


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    return split_blocks(text, _BLOCK, _read(names))


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    return json_args_grammar(tools, only, lambda name: f"{OPEN}{name}>", CLOSE)


FAMILY = Family(
    name="functionary",
    label="Functionary v3.1",
    signature=(OPEN, "<|eom_id|>"),
    transitions={CONTENT: ((OPEN, CALL), (PYTHON_TAG, CALL))},
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(OPEN, PYTHON_TAG),
    end_texts=("<|eot_id|>", "<|eom_id|>"),
    preserved=(OPEN, CLOSE, PYTHON_TAG),
)
