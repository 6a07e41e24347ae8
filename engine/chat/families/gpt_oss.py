"""GPT-OSS (harmony): messages ``<|channel|>analysis<|message|>...<|end|>`` (thinking) and
``<|start|>assistant<|channel|>final<|message|>...`` (the answer); a call is a message to ``functions.NAME``,
named in the channel (``<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}``) or in the
header (``<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}``), ended by ``<|call|>``."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import arguments_text, named_calls_grammar, new_call_id
from engine.chat.family import CALL, CONTENT, DROP, THINKING, Family, ToolCall

CHANNEL, MESSAGE, END, START, CONSTRAIN = "<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|constrain|>"
RETURN, CALL_END = "<|return|>", "<|call|>"
ANALYSIS = CHANNEL + "analysis" + MESSAGE
ANSWERS = (CHANNEL + "final" + MESSAGE, CHANNEL + "commentary" + MESSAGE,
           CHANNEL + "final " + CONSTRAIN + "json" + MESSAGE)  # the answer, a preamble, structured output
NEXT = START + "assistant"  # a new message of the same turn: markup between sections
TO_SELF = CHANNEL + "commentary to=assistant"  # a header some replies open with: addressed to itself, not a call
# A message to a recipient (a call), named in the header after ``<|start|>assistant`` (the reply's first message
# has that in the prompt, so it starts at `` to=``) or in the channel.
CALL_OPENS = (NEXT + " to=", " to=functions.", CHANNEL + "commentary to=", CHANNEL + "analysis to=")
FUNCTIONS = "functions."
_HEADER = re.compile(r"(.*?)<\|message\|>(.*?)(?:<\|end\|>|<\|call\|>|<\|return\|>|$)", re.DOTALL)
_RECIPIENT = re.compile(r"to=(\S+?)(?=[\s<]|$)")


def _read(header: str, body: str, names: Sequence[str]) -> ToolCall | None:
    to = _RECIPIENT.search(header)
    name = to.group(1).removeprefix(FUNCTIONS) if to and to.group(1).startswith(FUNCTIONS) else None
    if name not in names:
        return None
    try:
        args = json.loads(body)
    except json.JSONDecodeError:
        return None
    return ToolCall(new_call_id(), str(name), arguments_text(args)) if isinstance(args, dict) else None


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    """Each message of the held text: a call to an offered function, else its answer text kept (a message to
    another recipient, a built-in tool, keeps its body as text); thinking after a call is dropped."""
    calls: list[ToolCall] = []
    kept: list[str] = []
    for m in _HEADER.finditer(text):
        header, body = m.group(1), m.group(2)
        if not header and not body:
            continue
        call = _read(header, body, names)
        if call is not None:
            calls.append(call)
        elif "analysis" not in header or "to=" in header:
            kept.append(body)
    return "\n".join(k.strip() for k in kept if k.strip()), calls


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    return named_calls_grammar(
        tools, only, lambda name: f"{CHANNEL}commentary to={FUNCTIONS}{name} {CONSTRAIN}json{MESSAGE}")


FAMILY = Family(
    name="gpt_oss",
    label="GPT-OSS",
    signature=(CHANNEL, MESSAGE, "analysis"),
    transitions={
        CONTENT: ((ANALYSIS, THINKING), *((a, CONTENT) for a in ANSWERS), (NEXT, CONTENT), (TO_SELF, DROP),
                  *((o, CALL) for o in CALL_OPENS)),
        THINKING: ((END, CONTENT),),
        DROP: ((ANALYSIS, THINKING), *((a, CONTENT) for a in ANSWERS)),
    },
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(CHANNEL + "commentary to=" + FUNCTIONS,),
    end_texts=(RETURN, CALL_END),
    preserved=(CHANNEL, MESSAGE, END, START, CONSTRAIN),
    effort_key="reasoning_effort",
    extra={"close_thinking": END + NEXT + ANSWERS[0]},  # a spent thinking budget: the analysis ends, the answer opens
)
