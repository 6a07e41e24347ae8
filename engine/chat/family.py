"""One model family's reply format as data: where thinking and tool calls begin and end, how its calls are parsed,
the grammar of one forced call, and the texts that end its turn."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

CONTENT, THINKING, CALL, DROP = "content", "thinking", "call", "drop"
"""A reply's sections: shown as the answer; shown as thinking; held and parsed as tool calls at the end; markup the
format wraps around sections, never shown."""

Transitions = Mapping[str, tuple[tuple[str, str], ...]]
"""Per section, the markers that end it and the section each opens: ``{CONTENT: (("<think>", THINKING), ...)}``."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One parsed call: ``arguments`` is JSON text, as OpenAI's API carries it."""

    id: str
    name: str
    arguments: str


CallParser = Callable[[str, Sequence[str]], tuple[str, list[ToolCall]]]
"""The held call section's text (from its opening marker on) and the offered tool names -> the text that is not a
call (left to the content) and the calls, in order. A call that names no offered tool stays text."""

CallGrammar = Callable[[Sequence[Mapping[str, Any]], str | None], str]
"""The offered tools (OpenAI's form) and the one name tool_choice forces (or None) -> GBNF for exactly one call in
the family's own markup, its arguments held to the tool's parameter schema."""


@dataclass(frozen=True, slots=True)
class Family:
    """A model family's chat format.

    ``signature``: texts that all appear in the template's source when it is this family's (families are tried in
    the registry's order, the most specific first). ``transitions``: the section machine a reply runs through.
    ``call_open``: the markers at which a call may begin (the lazy grammar's triggers). ``end_texts``: turn ends that
    end the reply and are never shown. ``preserved``: marker texts a reply must keep even where the vocabulary has
    them as control tokens (so that the splitter sees them). ``thinking_key``: the template variable that switches
    thinking (``enable_thinking``, ``thinking``; None where the template has none); ``effort_key``: the variable
    that takes ``reasoning_effort`` (GPT-OSS), if any.
    """

    name: str
    label: str
    signature: tuple[str, ...]
    transitions: Transitions
    parse_calls: CallParser | None = None
    call_grammar: CallGrammar | None = None
    call_open: tuple[str, ...] = ()
    end_texts: tuple[str, ...] = ()
    preserved: tuple[str, ...] = ()
    thinking_key: str | None = None
    effort_key: str | None = None
    think_open: str = ""  # the marker that opens thinking: a prompt ending in it starts the reply in thinking
    extra: Mapping[str, Any] = field(default_factory=dict)  # template variables this family always passes

    def matches(self, template: str) -> bool:
        return all(s in template for s in self.signature)

    @property
    def calls(self) -> bool:
        """Whether the family has a tool-call format the project parses."""
        return self.parse_calls is not None

    def first_section(self, prompt_text: str) -> str:
        """The section a reply starts in after this rendered prompt: thinking when the prompt opened it."""
        if self.think_open and prompt_text.rstrip().endswith(self.think_open.strip()):
            return THINKING
        return CONTENT
