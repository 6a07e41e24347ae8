"""A thinking budget: the tokens a reply may think before its answer is due, and the markup that closes the
thinking block cleanly when they run out."""

from __future__ import annotations

from .family import CONTENT, THINKING, Family
from .stream import ReplySplitter

ANSWER_GAP = "\n\n"  # what a model writes between a closed thinking block and its answer


def closing_text(family: Family) -> str | None:
    """The markup that ends the family's thinking and opens its answer (None: the family has no thinking)."""
    if "close_thinking" in family.extra:
        return str(family.extra["close_thinking"])
    for marker, nxt in family.transitions.get(THINKING, ()):
        if nxt == CONTENT:
            return marker + ANSWER_GAP
    return None


class ThinkingBudget:
    """Counts a reply's tokens while it thinks (``spent``); :meth:`feed` says when the budget (``limit``; None: no
    limit, only the count) is spent."""

    def __init__(self, family: Family, section: str, limit: int | None) -> None:
        self.limit = limit
        self.close = closing_text(family)
        self._splitter = ReplySplitter(family, (), section)
        self.spent = 0

    def feed(self, text: str) -> bool:
        """Count one token's text; True when the reply is still thinking past the budget (close it now)."""
        thinking = self._splitter.section == THINKING
        self._splitter.feed(text)
        if thinking and self._splitter.section == THINKING:
            self.spent += 1
        over = self.limit is not None and self.spent >= self.limit
        return over and self.close is not None and self._splitter.section == THINKING

    def closed(self) -> None:
        """The closing markup was written: the reply is in its answer."""
        if self.close is not None:
            self._splitter.feed(self.close)
