"""A reply's thinking, shown in a block above its answer: open while the thinking streams, closed once the answer
starts (its header, "Thought for 3.2 s", is a link that opens it again), as LM Studio, Jan and Ollama show it.

The chat view is one rich-text document, so the block is HTML: a header link ``think:<key>`` (``live`` for the
reply streaming, else the message id) that the view turns into :meth:`ThinkingBlocks.toggle`.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable

THINK_BG = "#f6f8fa"
THINK_FG = "#57606a"
LIVE = "live"
OPEN_MARK, CLOSED_MARK = "▾", "▸"


def thought_for(seconds: object) -> str:
    """``Thought for 3.2 s``; ``Thoughts`` where the time is not known (a reply saved before it was measured)."""
    if isinstance(seconds, int | float) and not isinstance(seconds, bool):
        return f"Thought for {float(seconds):.1f} s"
    return "Thoughts"


def block_html(key: str, text: str, title: str, *, expanded: bool) -> str:
    """The block: a header link that opens or closes it, and (open) the thinking as plain, muted text."""
    mark = OPEN_MARK if expanded else CLOSED_MARK
    head = (f'<p style="margin:2px 0"><a href="think:{key}" style="color:{THINK_FG}">{mark} '
            f"{html.escape(title)}</a></p>")
    if not expanded:
        return head
    body = "<br/>".join(html.escape(line) for line in text.strip("\n").split("\n"))
    return (f'{head}<table width="100%" cellspacing="0" cellpadding="8" style="background-color:{THINK_BG};'
            f' margin-bottom:6px"><tr><td style="color:{THINK_FG}; font-size:small">{body or "…"}</td></tr>'
            "</table>")


class LiveThinking:
    """The streaming reply's thinking: its text, when it began and ended, and whether the user opened or closed it
    (until then it is open while the thinking streams and closed from the answer's first text on)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.text = ""
        self.started: float | None = None
        self.ended: float | None = None
        self.opened: bool | None = None  # the user's click, which wins over the automatic state

    def add(self, text: str) -> None:
        if self.started is None:
            self.started = self.clock()
        self.text += text

    def answer_began(self) -> None:
        """The answer's first text came: the thinking's time stops and the block closes (unless clicked open)."""
        if self.started is not None and self.ended is None:
            self.ended = self.clock()

    @property
    def seconds(self) -> float | None:
        if self.started is None:
            return None
        return (self.ended if self.ended is not None else self.clock()) - self.started

    @property
    def expanded(self) -> bool:
        return self.opened if self.opened is not None else self.ended is None

    def html(self) -> str:
        if not self.text:
            return ""
        title = thought_for(self.seconds) if self.ended is not None else f"Thinking… {self.seconds or 0.0:.1f} s"
        return block_html(LIVE, self.text, title, expanded=self.expanded)


class ThinkingBlocks:
    """Which saved replies' blocks the user opened (they start closed), and the streaming reply's thinking."""

    def __init__(self) -> None:
        self.opened: set[str] = set()
        self.live: LiveThinking | None = None

    def toggle(self, key: str) -> None:
        """Open a closed block, close an open one (``key``: :data:`LIVE` or a message id)."""
        if key == LIVE:
            if self.live is not None:
                self.live.opened = not self.live.expanded
        elif key in self.opened:
            self.opened.discard(key)
        else:
            self.opened.add(key)

    def saved_html(self, message_id: int, reasoning: str, seconds: object) -> str:
        """A saved reply's block ("" when it has no thinking)."""
        if not reasoning.strip():
            return ""
        key = str(message_id)
        return block_html(key, reasoning, thought_for(seconds), expanded=key in self.opened)
