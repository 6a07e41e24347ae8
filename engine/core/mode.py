"""The decoding modes, declared once with what each needs: every list of modes and every test of one derives from here.

A mode is a ``str`` (``Mode.SD == "sd"``), so requests, settings files and the command line keep their words.
"""

from __future__ import annotations

from enum import StrEnum

from engine.errors import ParameterError


class Mode(StrEnum):
    AR = "ar"  # the target alone, one token per decode
    SD = "sd"  # the draft model proposes K tokens, the target verifies them in one batch
    SSD = "ssd"  # sd whose next draft is made while the target verifies (the speculation cache)
    LOOKUP = "lookup"  # drafts from an n-gram pool over the conversation, no draft model
    AUTO = "auto"  # picks among the others round by round, from what it measures

    @property
    def needs_draft(self) -> bool:
        """Cannot run on a target alone."""
        return self in (Mode.SD, Mode.SSD)

    @property
    def may_draft(self) -> bool:
        """Drafts with the draft model when one is loaded."""
        return self.needs_draft or self is Mode.AUTO

    @property
    def drafts_inline(self) -> bool:
        """Its draft decodes run on the generating thread (sd waits for its draft; ssd and auto draft beside)."""
        return self is Mode.SD

    @property
    def has_tree(self) -> bool:
        """Drafts a tree of next rounds for the likely outcomes (its fan-out and geometric settings apply)."""
        return self in (Mode.SSD, Mode.AUTO)

    @classmethod
    def parse(cls, value: str) -> Mode:
        """The mode named ``value``; a :class:`ParameterError` naming the choices for any other word."""
        try:
            return cls(value)
        except ValueError:
            raise ParameterError(f"mode must be one of {', '.join(MODES)}, got {value!r}") from None

    @classmethod
    def drafting(cls) -> tuple[Mode, ...]:
        """The modes that draft with the draft model on every round (those that need one)."""
        return tuple(m for m in cls if m.needs_draft)

    @classmethod
    def runnable(cls, has_draft: bool) -> tuple[Mode, ...]:
        """The modes a pair can run: every one with a draft model, those that need none without."""
        return tuple(m for m in cls if has_draft or not m.needs_draft)


MODES: tuple[str, ...] = tuple(m.value for m in Mode)
DRAFTING: tuple[Mode, ...] = Mode.drafting()  # a plan's or a round's mode (a word or a Mode) is tested by `in`
