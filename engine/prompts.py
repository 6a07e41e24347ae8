"""What an engine offers for prompts and replies' text: tokens of raw text or of chat messages (with the template's
switches), the model's chat format, and the section a reply starts in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .chat import builtin, markers, prepare, rendering
from .chat import format as chat_format
from .chat.families import detect
from .chat.family import Family
from .core import fim
from .core.backend import Model


class Prompts:
    """The prompt side of :class:`~engine.Engine` (its target model is ``target_model``)."""

    target_model: Model
    n_ctx: int

    def _chat_markers(self, models: Sequence[Model]) -> frozenset[int]:
        """Set up the family's markers on ``models`` (the target's vocabulary): its turn ends end a reply, and the
        ids of the marker texts a reply keeps (:attr:`Family.preserved`) are returned."""
        family = self.family()
        for m in models:
            m.add_eog(markers.single_tokens(m, family.end_texts))
        return markers.single_tokens(self.target_model, family.preserved)

    def family(self, template: str | None = None) -> Family:
        """The reply format of the model's chat template (or of ``template``)."""
        return detect(template if template is not None else self.target_model.chat_template())

    def tokenize(self, text: str) -> list[int]:
        return self.target_model.tokenize(text, add_special=True, parse_special=False)

    def chat_tokens(self, prompt: str, system: str | None = None) -> list[int]:
        return rendering.tokenize_chat(self.target_model, rendering.build_messages(prompt, system))

    def messages_tokens(self, messages: Sequence[rendering.Message], variables: Mapping[str, Any] | None = None,
                        template: str | None = None, tools: list[dict[str, Any]] | None = None) -> list[int]:
        """The prompt of ``messages``; ``variables``: the template's switches (enable_thinking...); ``template``: a
        source that stands in for the model's."""
        return rendering.tokenize_chat(self.target_model, messages, tools, variables=variables, template=template)

    def chat_format(self, template: str | None = None) -> chat_format.ChatFormat:
        return chat_format.chat_format(self.target_model, template)

    def reply_section(self, messages: Sequence[rendering.Message], variables: Mapping[str, Any] | None = None,
                      template: str | None = None, tools: list[dict[str, Any]] | None = None) -> str:
        """The section (content or thinking) a reply to ``messages`` starts in."""
        return chat_format.reply_section(self.target_model, messages, variables, template, tools)

    def prepare_chat(self, request: prepare.ChatRequest) -> prepare.PreparedChat:
        """``request``'s chat fitted to the context, with its reply's family and section (every render here)."""
        return prepare.prepare_chat(self, self.n_ctx, request)

    @property
    def n_vocab(self) -> int:
        return self.target_model.n_vocab

    def fim_prompt(self, prefix: str, suffix: str) -> tuple[list[int], frozenset[int]]:
        """The fill-in-the-middle prompt for the code between ``prefix`` and ``suffix``, and the tokens that end the
        middle (:mod:`engine.core.fim`; ParameterError for a model without FIM tokens)."""
        return fim.fim_tokens(self.target_model, prefix, suffix), fim.fim_ends(self.target_model)

    def suggested_template(self) -> str | None:
        """The builtin template that fits the target's vocabulary or architecture, or None."""
        return builtin.suggest(self.target_model)

    def markup_tokens(self, text: str) -> list[int]:
        """The tokens of a chat format's own markup (its special tokens parsed), as the reply would write them."""
        return self.target_model.tokenize(text, add_special=False, parse_special=True)

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self.target_model.detokenize(tokens)
