"""The engine's chat-format names the app uses, in one place."""

from __future__ import annotations

from engine import CONTENT_PIECE, THINKING_PIECE, ReplyPiece, ReplySplitter
from engine import ChatFamily as Family
from engine import chat_builtin as builtin
from engine import chat_family_named as by_name
from engine import plain_family as plain

CHAT_TEMPLATES: tuple[str, ...] = tuple(builtin.TEMPLATES)


def chat_family(name: str) -> Family:
    """A family by its name (a template of no known family: :data:`plain.FAMILY`, all content)."""
    return by_name(name) or plain.FAMILY


def chat_template_source(name: str) -> str:
    """A builtin template's source (``chatml``, ``llama3``...)."""
    return builtin.source(name)


__all__ = ["CHAT_TEMPLATES", "CONTENT_PIECE", "THINKING_PIECE", "ReplyPiece", "ReplySplitter", "chat_family",
           "chat_template_source"]
