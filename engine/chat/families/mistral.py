"""Mistral, both generations: ``[TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}, ...]`` (Nemo, Small 3.1)
and ``[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...}`` once per call (Small 3.2, Devstral, Ministral 3); Magistral and
Ministral reasoning in ``[THINK]...[/THINK]``."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import RULES, arguments_text, json_object_grammar, literal, named_calls_grammar
from engine.chat.family import CALL, CONTENT, THINKING, Family, ToolCall
from engine.chat.tagged import leading_calls
from engine.core.gbnf import either

OPEN, ARGS, CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"
THINK_OPEN, THINK_CLOSE = "[THINK]", "[/THINK]"
ID_CHARS = 9  # Mistral's templates refuse a call id that is not 9 letters and digits
_JSON = json.JSONDecoder()


def new_id() -> str:
    return secrets.token_hex(ID_CHARS)[:ID_CHARS]


def _json_list(seg: str, names: Sequence[str]) -> tuple[list[ToolCall], str] | None:
    """``[{"name": ..., "arguments": ...}, ...]`` (or one object) at the start of ``seg``, and the text after it;
    the model's own ids kept."""
    return leading_calls(seg, names, ("arguments", "parameters"), _item_id)


def _item_id(item: dict[str, Any]) -> str:
    cid = item.get("id")
    return cid if isinstance(cid, str) and cid else new_id()


def _named(seg: str, names: Sequence[str]) -> tuple[list[ToolCall], str] | None:
    """``NAME[CALL_ID]ID[ARGS]{...}`` (the id optional) at the start of ``seg``, and the text after it."""
    head, sep, rest = seg.partition(ARGS)
    name, _, cid = head.partition(CALL_ID)
    if not sep or name.strip() not in names:
        return None
    try:
        args, end = _JSON.raw_decode(rest.lstrip())
    except json.JSONDecodeError:
        return None
    return [ToolCall(cid.strip() or new_id(), name.strip(), arguments_text(args))], rest.lstrip()[end:]


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    calls: list[ToolCall] = []
    head, *segs = text.split(OPEN)
    kept = [head]
    for seg in segs:
        found = _json_list(seg, names) if seg.lstrip().startswith(("[", "{")) else _named(seg, names)
        if found is None:
            kept.append(OPEN + seg)
        else:
            calls += found[0]
            kept.append(found[1])
    return "".join(kept).strip(), calls


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    """Either generation's form: the model writes the one it was trained on."""
    named = named_calls_grammar(tools, only, lambda name: f"{OPEN}{name}{ARGS}")
    listed = f"root ::= {literal(OPEN + '[')} {RULES}root {literal(']')}\n" + json_object_grammar(tools, only)
    return either(named, listed)


FAMILY = Family(
    name="mistral",
    label="Mistral, Mistral Small, Devstral, Magistral, Ministral",
    signature=(OPEN,),
    transitions={CONTENT: ((THINK_OPEN, THINKING), (OPEN, CALL)), THINKING: ((THINK_CLOSE, CONTENT),)},
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(OPEN,),
    end_texts=("</s>",),
    preserved=(OPEN, ARGS, CALL_ID, THINK_OPEN, THINK_CLOSE),
    think_open=THINK_OPEN,
)
