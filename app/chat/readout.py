"""The readout under the conversation: the shown conversation's reply, live while it streams, else its last one.

It says in plain words the speed and how much speculation helped ("19.9 tok/s · 1.3× plain decoding", within the
reply itself: :mod:`app.chat.speedup`), and what the reply reused ("prompt: read 40 of 900 tokens, 860 from the
cache", as after a tool's result; "lookup drafted 12 of 20 accepted tokens"); the engine's other figures and what the
speed-up compares are in its tooltip.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from PySide6.QtWidgets import QLabel

from app.chat.speedup import PLAIN, gain_text, tooltip_line
from app.chat.stats_text import (
    HIDDEN_REASONS,
    REASON_TEXT,
    is_live,
    message_status,
    plural,
    reuse_parts,
    stats_text,
)
from app.history.records import Message
from engine import Mode

NO_REPLY = "No reply yet"
STOPPING = "stopping…"
WRITING = "writing…"
MIN_TOKENS = 8  # a rate over fewer tokens is mostly the first round's and the prompt's noise
MIN_SECONDS = 0.5  # nor is one over less decoding time than this worth showing


def settled(stats: Mapping[str, Any]) -> bool:
    """Whether the reply's rate means something: enough tokens, and while it streams enough decoding time."""
    decoding_s = float(stats.get("seconds") or 0.0) - float(stats.get("ttft_s") or 0.0)
    enough = int(stats.get("new_tokens") or 0) >= MIN_TOKENS
    return enough and (decoding_s >= MIN_SECONDS or not is_live(stats))


def short_mode(stats: Mapping[str, Any]) -> str:
    """``sd``; ``auto → ssd`` while auto runs ssd; ``auto`` once it is done (its rounds are in the tooltip)."""
    mode = str(stats.get("mode") or "")
    current = str(stats.get("current_mode") or "")
    if mode == Mode.AUTO and is_live(stats) and current and current != Mode.AUTO:
        return f"auto → {current}"
    return mode


def readout_html(stats: Mapping[str, Any]) -> str:
    """One short line: the mode in bold, the speed and the gain once they mean something, then any end reason."""
    parts = [f"<b>{html.escape(short_mode(stats))}</b>"] if stats.get("mode") else []
    if settled(stats) and stats.get("tokens_per_second"):
        parts.append(f"{float(stats['tokens_per_second']):.1f} tok/s")
        gain = gain_text(stats)
        if gain:
            parts.append(gain)
    elif is_live(stats):
        parts.append(WRITING)
    else:
        parts.append(plural(int(stats.get("new_tokens") or 0), "token"))
    parts += [html.escape(p) for p in reuse_parts(stats)]
    if stats.get("dropped_turns"):
        parts.append(f"{plural(int(stats['dropped_turns']), 'oldest turn')} left out to fit the context")
    reason = str(stats.get("finish_reason") or "")
    if reason not in HIDDEN_REASONS:
        parts.append(html.escape(REASON_TEXT.get(reason, reason)))
    if stats.get("warning"):  # a fixed drafting mode that cannot pay on this placement (engine.drafting_warning)
        parts.append(f"⚠ {html.escape(str(stats['warning']))}")
    return " · ".join(parts)


class ReadoutLabel(QLabel):
    """The readout's label: new text drops the old tooltip (the details belong to the text they came with)."""

    def setText(self, text: str) -> None:
        """Show ``text``; the tooltip is cleared until the caller sets the new details."""
        super().setText(text)
        self.setToolTip("")


class Readout:
    """Writes the readout label; it describes the conversation on screen and nothing else.

    While that conversation's reply streams it shows the engine's live stats; otherwise the stats of its last
    reply as saved (its speed-up is read from them, so a restart or a switch shows what that reply did), or
    :data:`NO_REPLY`.
    """

    def __init__(self, label: QLabel) -> None:
        self.label = label

    def show_waiting(self, mode: str) -> None:
        """A reply was requested; nothing has come back yet."""
        self._set(f"<b>{html.escape(mode)}</b> · {WRITING}", "")

    def show_stopping(self) -> None:
        """Stop was clicked: say so at once (the reply ends within one round)."""
        text = self.label.text()
        if STOPPING not in text:
            self._set(f"{text} · {STOPPING}" if text and text != NO_REPLY else STOPPING, self.label.toolTip())

    def show_live(self, stats: Mapping[str, Any], *, stopping: bool = False) -> None:
        """The engine's running stats for the reply on screen."""
        tail = f" · {STOPPING}" if stopping else ""
        self._set(readout_html(stats) + tail, _details(stats_text(stats), stats, live=True))

    def show_messages(self, messages: Sequence[Message]) -> None:
        """The last reply among ``messages`` (saved or kept in memory), or :data:`NO_REPLY`."""
        last = next((m for m in reversed(messages) if m.role == "assistant"), None)
        if last is None:
            self._set(NO_REPLY, "")
        elif last.stats:
            status = message_status(last.stats, complete=last.complete, unsaved=last.unsaved)
            self._set(readout_html(last.stats) + _status_tail(last), _details(status, last.stats, live=False))
        else:
            self._set(html.escape(message_status(None, complete=last.complete, unsaved=last.unsaved))
                      or NO_REPLY, "")

    def _set(self, text: str, details: str) -> None:
        self.label.setText(text)
        self.label.setToolTip(details)


def _details(line: str, stats: Mapping[str, Any], *, live: bool) -> str:
    """The tooltip: the stats line, then what the speed-up compares, or why there is none (a speculative reply)."""
    if stats.get("mode") == PLAIN or not stats.get("mode"):
        return line
    return f"{line}\n{tooltip_line(stats, live=live)}"


def _status_tail(m: Message) -> str:
    """What the stats line leaves out of a reply's state: cut short, not yet saved."""
    extra = message_status(None, complete=m.complete, unsaved=m.unsaved)
    return f" · {html.escape(extra)}" if extra else ""
