"""The engine's chat-format names the app uses, in one place.

engine/__init__ does not export these yet (issue 57 is landing them): until it does, this module alone imports them
from ``engine.chat``, so that the switch is one file (tests/test_app_imports.py names it until then).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from engine.chat import builtin
from engine.chat.families import by_name, plain
from engine.chat.family import CONTENT as CONTENT_PIECE
from engine.chat.family import THINKING as THINKING_PIECE
from engine.chat.family import Family
from engine.chat.format import ChatFormat, thinking_variables
from engine.chat.stream import Piece as ReplyPiece
from engine.chat.stream import ReplySplitter

CHAT_TEMPLATES: tuple[str, ...] = tuple(builtin.TEMPLATES)


def chat_family(name: str) -> Family:
    """A family by its name (a template of no known family: :data:`plain.FAMILY`, all content)."""
    return by_name(name) or plain.FAMILY


def chat_template_source(name: str) -> str:
    """A builtin template's source (``chatml``, ``llama3``...)."""
    return builtin.source(name)


def suggest_template(engine: Any, _stop: threading.Event, _report: Callable[[Any], object]) -> str | None:
    """Run in the engine process (``RemoteEngine.run_task``): the builtin template that fits the target's vocabulary
    or architecture, or None."""
    return builtin.suggest(engine.target_model)


__all__ = ["CHAT_TEMPLATES", "CONTENT_PIECE", "THINKING_PIECE", "ChatFormat", "ReplyPiece", "ReplySplitter",
           "chat_family", "chat_template_source", "suggest_template", "thinking_variables"]
