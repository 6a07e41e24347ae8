"""A template of no known family: its reply is all content, and no tool-call format is known."""

from __future__ import annotations

from engine.chat.family import Family

FAMILY = Family(name="plain", label="a template of no known family", signature=(), transitions={})
