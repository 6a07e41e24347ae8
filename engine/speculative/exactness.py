"""The exactness check: a speculative reply against the ar reply for the same prompt (greedy, token by token).

Not verification (which accepts drafts inside a round): this compares two finished outputs, as the
bench, the app's "check exactness" and the self-test do.
"""

from __future__ import annotations

from collections.abc import Sequence


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first mismatch between two token lists; a length difference counts; None if equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))
