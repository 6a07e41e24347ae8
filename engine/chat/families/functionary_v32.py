"""Functionary v3.2: every part of a reply opens with ``>>>RECIPIENT\\n``, ``all`` for text to the user, a tool's
name before its JSON arguments; the prompt writes the first ``>>>``, so the reply starts at a recipient."""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import RULES, literal
from engine.chat.families.functionary import call_of
from engine.chat.family import CALL, CONTENT, DROP, Family, ToolCall
from engine.chat.tagged import json_args_grammar

PART, ALL = ">>>", "all\n"
NAME_CHARS = string.ascii_letters + string.digits + "_-."


def _recipient_markers() -> tuple[tuple[str, str], ...]:
    """At a recipient, ``all\\n`` opens text; any other recipient is a call, held from its first character (so the
    held call keeps its name): each text that parts from ``all\\n`` opens it. Markers are found anywhere in the held
    text, so none may occur inside ``all\\n`` past its start: such a one is lengthened by a character instead."""
    out = [(ALL, CONTENT)]
    pending = [ALL[:n] + c for n in range(len(ALL)) for c in NAME_CHARS + "\n" if c != ALL[n]]
    while pending:
        m = pending.pop()
        if ALL.find(m, 1) < 0:
            out.append((m, CALL))
        elif len(m) < len(ALL):
            pending += [m + c for c in NAME_CHARS + "\n"]
    return tuple(out)


class RecipientFamily(Family):
    """A family whose reply starts at a recipient (in :data:`DROP`, read by its recipient markers) where the prompt
    ends in the part mark."""

    __slots__ = ()

    def first_section(self, prompt_text: str) -> str:
        return DROP if prompt_text.rstrip().endswith(PART) else super().first_section(prompt_text)


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    # The held text runs from the first call's recipient: parts split at the part mark, each ``RECIPIENT\n BODY``.
    calls: list[ToolCall] = []
    kept: list[str] = []
    for part in text.split(PART):
        recipient, _, body = part.partition("\n")
        call = call_of(recipient.strip(), body, names)
        if call is not None:
            calls.append(call)
        elif recipient.strip() == ALL.strip():
            kept.append(body)
        elif part.strip():
            kept.append(PART + part if kept or calls else part)
    return "\n".join(k.strip() for k in kept if k.strip()), calls


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    # The part mark is optional: the prompt writes the first one, a lazy grammar is triggered by a later one.
    body = json_args_grammar(tools, only, lambda name: f"{name}\n", "").replace("root ::= ", f"{RULES}part ::= ", 1)
    return f"root ::= {literal(PART)}? {RULES}part\n{body}"


FAMILY = RecipientFamily(
    name="functionary_v32",
    label="Functionary v3.2",
    signature=(">>>all", PART + "${recipient}"),
    transitions={DROP: _recipient_markers(), CONTENT: ((PART, DROP),)},
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(PART,),
    end_texts=("<|eot_id|>", "<|eom_id|>"),
    preserved=(PART,),
)
