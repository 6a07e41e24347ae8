"""Gemma 4: thinking in ``<|channel>thought ... <channel|>`` and ``<|tool_call>call:NAME{key:value,...}<tool_call|>``,
whose keys are bare and whose strings sit between ``<|"|>`` marks (Gemma 2 and 3 have no tools: they are plain)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.chat.calls import arguments_text, new_call_id
from engine.chat.family import CALL, CONTENT, DROP, THINKING, Family, ToolCall
from engine.chat.tagged import BlockReader, split_blocks, tagged_grammar

OPEN, CLOSE = "<|tool_call>", "<tool_call|>"
CHANNEL_OPEN, CHANNEL_CLOSE, THOUGHT = "<|channel>", "<channel|>", "thought"
QUOTE = '<|"|>'
_BLOCK = re.compile(r"<\|tool_call>\s*call:([^{\s]+)\s*(\{.*?\})\s*(?:<tool_call\|>|$)", re.DOTALL)
_STOPS = ",}]"  # what ends a bare value


class _Reader:
    """Gemma's value syntax: JSON with bare keys and ``<|"|>``-quoted strings (JSON's own strings read too)."""

    def __init__(self, text: str) -> None:
        self.text, self.i = text, 0

    def _skip(self) -> None:
        while self.i < len(self.text) and self.text[self.i].isspace():
            self.i += 1

    def _take(self, token: str) -> bool:
        self._skip()
        if self.text.startswith(token, self.i):
            self.i += len(token)
            return True
        return False

    def _items(self, close: str, item: Any) -> None:
        while not self._take(close):
            item()
            if not self._take(",") and not self.text.startswith(close, self.i):
                raise ValueError(f"expected , or {close} at {self.i}")

    def value(self) -> Any:
        self._skip()
        if self._take(QUOTE):
            end = self.text.find(QUOTE, self.i)
            if end < 0:
                raise ValueError("unclosed string")
            out, self.i = self.text[self.i:end], end + len(QUOTE)
            return out
        if self._take("{"):
            obj: dict[str, Any] = {}

            def member() -> None:
                key = self.value() if self.text.startswith((QUOTE, '"'), self.i) else self._bare(":")
                if not self._take(":"):
                    raise ValueError(f"expected : at {self.i}")
                obj[str(key)] = self.value()
            self._items("}", member)
            return obj
        if self._take("["):
            arr: list[Any] = []
            self._items("]", lambda: arr.append(self.value()))
            return arr
        if self.text.startswith('"', self.i):
            out, self.i = json.JSONDecoder().raw_decode(self.text, self.i)
            return out
        return json.loads(self._bare(_STOPS))

    def _bare(self, stops: str) -> str:
        start = self.i
        while self.i < len(self.text) and self.text[self.i] not in stops:
            self.i += 1
        return self.text[start:self.i].strip()


def _read(names: Sequence[str]) -> BlockReader:
    def read(m: re.Match[str]) -> list[ToolCall] | None:
        reader = _Reader(m.group(2))
        try:
            args = reader.value()
        except (ValueError, IndexError):  # json.JSONDecodeError is a ValueError
            return None
        if m.group(1) not in names or reader.text[reader.i:].strip() or not isinstance(args, dict):
            return None
        return [ToolCall(new_call_id(), m.group(1), arguments_text(args))]
    return read


def parse_calls(text: str, names: Sequence[str]) -> tuple[str, list[ToolCall]]:
    return split_blocks(text, _BLOCK, _read(names))


def call_grammar(tools: Sequence[Mapping[str, Any]], only: str | None) -> str:
    # A closing comma is read as none, so each argument is written ``key:value,``.
    return tagged_grammar(tools, only, lambda name: f"{OPEN}call:{name}{{", lambda key: (f"{key}:", ","),
                          "}" + CLOSE, quote=QUOTE)


FAMILY = Family(
    name="gemma4",
    label="Gemma 4",
    signature=(OPEN, CHANNEL_OPEN),
    # A channel's name follows its open mark: "thought" is thinking; a stray mark (an empty or doubled channel)
    # is markup and is dropped.
    transitions={
        CONTENT: ((CHANNEL_OPEN, DROP), (CHANNEL_CLOSE, CONTENT), (OPEN, CALL)),
        DROP: ((THOUGHT, THINKING), (CHANNEL_OPEN, DROP), (CHANNEL_CLOSE, CONTENT)),
        THINKING: ((CHANNEL_CLOSE, CONTENT),),
    },
    parse_calls=parse_calls,
    call_grammar=call_grammar,
    call_open=(OPEN,),
    end_texts=("<turn|>", "<|tool_response>"),
    preserved=(CHANNEL_OPEN, CHANNEL_CLOSE, OPEN, CLOSE, QUOTE),
    thinking_key="enable_thinking",
)
