"""SmolLM3: thinking switched by ``/think`` and ``/no_think`` in the system text (the template writes them from
``enable_thinking``), ``<think>``, and Hermes's ``<tool_call>{...}</tool_call>`` calls."""

from __future__ import annotations

from engine.chat.families import hermes
from engine.chat.family import CALL, CONTENT, THINKING, Family

FAMILY = Family(
    name="smollm3",
    label="SmolLM3",
    signature=("/no_think", "<|im_start|>"),
    transitions={CONTENT: ((hermes.THINK_OPEN, THINKING), (hermes.OPEN, CALL)),
                 THINKING: ((hermes.THINK_CLOSE, CONTENT),)},
    parse_calls=hermes.parse_calls,
    call_grammar=hermes.call_grammar,
    call_open=(hermes.OPEN,),
    end_texts=("<|im_end|>",),
    preserved=(hermes.THINK_OPEN, hermes.THINK_CLOSE, hermes.OPEN, hermes.CLOSE),
    thinking_key="enable_thinking",
    think_open=hermes.THINK_OPEN,
)
