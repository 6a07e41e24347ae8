"""A reply's text, as it streams, split into content, thinking and tool calls by its family's section markers.

Text in a section is sent as it comes, less a tail that may begin one of the section's markers (:mod:`.holdback`);
markers themselves are never shown. A call section is held to the end of the reply and parsed there; what does not
parse as a call of an offered tool is sent as content then. Thinking never opens a call: only the markers of the
section the reply is in are looked for, so a call written inside a thinking block stays thinking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .family import CALL, CONTENT, DROP, THINKING, Family, ToolCall
from .holdback import first_marker, held_tail


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of the reply's text in one section: ``kind`` is content or thinking."""

    kind: str
    text: str


class ReplySplitter:
    """Feed text as it comes (:meth:`feed`), then :meth:`finish`; ``names``: the tools the reply may call (none: a
    call marker is plain text)."""

    def __init__(self, family: Family, names: Sequence[str] = (), section: str = CONTENT) -> None:
        self.family = family
        self.names = list(names)
        self.section = section
        self._buf = ""  # text not yet sent: a tail that may begin a marker
        self._held = ""  # a call section, parsed at the end
        self._fresh = False  # a section just opened: its leading whitespace is the markup's, not the model's text
        self.thinking_chars = 0

    def _markers(self) -> tuple[tuple[str, str], ...]:
        rules = self.family.transitions.get(self.section, ())
        return tuple((m, nxt) for m, nxt in rules if nxt != CALL or (self.names and self.family.calls))

    def feed(self, text: str) -> list[Piece]:
        """The pieces safe to show now."""
        if self.section == CALL:
            self._held += text
            return []
        self._buf += text
        return self._scan(final=False)

    def _scan(self, final: bool) -> list[Piece]:
        """Send the buffer up to its next marker, section by section. A marker that begins a longer one waits
        for the text that settles which it is (unless the reply has ended): whole or in chunks, the longest wins."""
        out: list[Piece] = []
        while self.section != CALL:
            rules = self._markers()
            at, marker = first_marker(self._buf, (m for m, _ in rules))
            if at >= 0 and not final and _may_grow(self._buf[at:], marker, rules):
                self._emit(out, self._buf[:at])
                self._buf = self._buf[at:]
                return out
            if at < 0:
                keep = held_tail(self._buf, (m for m, _ in rules))
                self._emit(out, self._buf[:len(self._buf) - keep])
                self._buf = self._buf[len(self._buf) - keep:]
                return out
            self._emit(out, self._buf[:at])
            nxt = dict(rules)[marker]
            self._buf = self._buf[at + len(marker):]
            self.section, self._fresh = nxt, True
            if nxt == CALL:
                self._held, self._buf = marker + self._buf, ""
        return out

    def _emit(self, out: list[Piece], text: str) -> None:
        if self._fresh:
            text = text.lstrip()
            self._fresh = not text
        if not text or self.section == DROP:
            return
        if self.section == THINKING:
            self.thinking_chars += len(text)
        if out and out[-1].kind == self.section:
            out[-1] = Piece(self.section, out[-1].text + text)
        else:
            out.append(Piece(self.section, text))

    def finish(self) -> tuple[list[Piece], list[ToolCall]]:
        """The pieces still held (the call section's leftover text as content) and the reply's calls."""
        out = self._scan(final=True) if self.section != CALL else []
        if self.section != CALL:
            self._emit(out, self._buf)
            self._buf = ""
            return out, []
        held, self._held = self._held, ""
        parse = self.family.parse_calls
        rest, calls = parse(held, self.names) if parse is not None else (held, [])
        if rest.strip():
            self.section, self._fresh = CONTENT, True
            self._emit(out, rest.rstrip())
        return out, calls


def _may_grow(tail: str, marker: str, rules: Sequence[tuple[str, str]]) -> bool:
    """Whether ``tail`` (the buffer from a found ``marker`` on) may still become a longer marker."""
    return any(len(m) > len(tail) and m.startswith(marker) and m.startswith(tail) for m, _ in rules)


def split_whole(family: Family, text: str, names: Sequence[str] = (),
                section: str = CONTENT) -> tuple[str, str, list[ToolCall]]:
    """A whole reply as (content, reasoning, calls)."""
    s = ReplySplitter(family, names, section)
    pieces = s.feed(text)
    rest, calls = s.finish()
    content = "".join(p.text for p in [*pieces, *rest] if p.kind == CONTENT)
    reasoning = "".join(p.text for p in [*pieces, *rest] if p.kind == THINKING)
    return (content.strip() if calls else content), reasoning.strip(), calls
