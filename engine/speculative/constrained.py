"""Constraints (bias, penalties, grammar) inside speculation: the target's rows and the draft's mirror.

Target: a verify batch's row r predicts the position after the draft's first r tokens, so
:class:`ConstrainedRows` reads row r through the constraint moved past exactly those tokens. Every verification
rule reads row r only once the draft's first r tokens are accepted, so the one state moves forward and never back;
:meth:`ConstrainedRows.finish` then moves it past the round's emitted tokens. ar reads the same rows after the
same committed tokens, so a constrained reply is the same in every mode (greedy: token for token).

Draft: :class:`DraftConstraint` keeps a copy of the constraint at the committed tokens the drafter last saw and
hands out clones for the paths it drafts along (sequential drafts, the tree's branches). A draft that follows the
constraint is a draft the target can accept; one that does not is still verified exactly, only accepted less.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from engine.core.constraints import Constraint
from engine.core.grammar import GrammarError
from engine.core.ranks import FloatRow
from engine.core.sampling import Dist, SamplingParams


class RawRows(Protocol):
    def row(self, r: int) -> FloatRow: ...


class ConstrainedRows:
    """:class:`~engine.speculative.verify.TargetRows` read through ``constraint`` (which this moves forward)."""

    def __init__(self, rows: RawRows, draft: Sequence[int], constraint: Constraint) -> None:
        self._rows = rows
        self._draft = draft
        self._c = constraint
        self._at = 0  # draft tokens the constraint has moved past

    def _row(self, r: int) -> FloatRow:
        while self._at < r:
            self._c.accept(self._draft[self._at])
            self._at += 1
        return self._rows.row(r)

    def argmax(self, r: int) -> int:
        return self._c.argmax(self._row(r))

    def dist(self, r: int, params: SamplingParams) -> Dist:
        return self._c.dist(self._row(r), params)

    def finish(self, emitted: Sequence[int]) -> None:
        """Move past the rest of the round's ``emitted`` tokens (its accepted drafts, then the target's token)."""
        for tok in emitted[self._at:]:
            self._c.accept(tok)
        self._at = len(emitted)


class DraftConstraint:
    """The target's constraint mirrored on the draft model, for the paths the drafter drafts along."""

    def __init__(self, constraint: Constraint, prompt_len: int) -> None:
        self._base = constraint
        self._prompt_len = prompt_len
        self._seen: list[int] = []  # the reply's tokens the base has moved past
        self.broken = False  # a committed token the draft's grammar refuses (vocabularies differ): draft free

    def at(self, committed: Sequence[int]) -> Constraint | None:
        """A clone of the constraint after ``committed`` (prompt, then the reply so far); None when broken."""
        if self.broken:
            return None
        reply = committed[self._prompt_len:]
        n = len(self._seen)
        if list(reply[:n]) != self._seen:  # not a continuation (cannot happen within a reply): start over
            return None
        try:
            for tok in reply[n:]:
                self._base.accept(tok)
                self._seen.append(tok)
        except GrammarError:
            self.broken = True
            return None
        return self._base.clone()

    def close(self) -> None:
        self._base.close()


def follow(state: Constraint | None, tokens: Sequence[int]) -> Constraint | None:
    """``state`` moved past ``tokens`` (a clone), or None when one of them is not allowed."""
    if state is None:
        return None
    twin = state.clone()
    try:
        for tok in tokens:
            twin.accept(tok)  # checks the grammar first: one query per token, not two
    except GrammarError:
        twin.close()
        return None
    return twin
