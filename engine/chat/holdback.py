"""The one hold-back rule for streamed text: keep back the tail that may be the start of a marker (a stop string, a
thinking or tool-call marker), send the rest."""

from __future__ import annotations

from collections.abc import Iterable


def first_marker(text: str, markers: Iterable[str]) -> tuple[int, str]:
    """The earliest complete marker in ``text`` (the longest where two start at once): (index, marker), or (-1, "")."""
    best, found = -1, ""
    for m in markers:
        if not m:
            continue
        at = text.find(m)
        if at >= 0 and (best < 0 or at < best or (at == best and len(m) > len(found))):
            best, found = at, m
    return best, found


def held_tail(text: str, markers: Iterable[str]) -> int:
    """How many characters at the end of ``text`` may begin one of ``markers`` (0: all of it is safe to send)."""
    hold = 0
    for m in markers:
        for n in range(min(len(m) - 1, len(text)), hold, -1):
            if text.endswith(m[:n]):
                hold = n
                break
    return hold
