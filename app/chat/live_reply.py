"""The reply in flight as the view has shown it: its mode, its latest stats and the turns left out to fit it, and
its partial save (what the view shows, its thinking apart, ``complete=False``)."""

from __future__ import annotations

from typing import Any

from app.chat.pane import ChatPane
from app.history.save_queue import SaveQueue


class LiveReply:
    """The streaming reply's figures and text since the reply session began it; ``pending`` while text came unsaved."""

    def __init__(self, pane: ChatPane, saves: SaveQueue) -> None:
        self.pane, self.saves = pane, saves
        self.mode = ""
        self.last_stats: dict[str, Any] | None = None
        self.dropped = 0
        self.pending = False

    def begin(self, mode: str) -> None:
        self.mode, self.last_stats, self.dropped = mode, None, 0
        self.pane.chat_view.begin_stream()

    def with_fit(self, stats: dict[str, Any]) -> dict[str, Any]:
        """The engine's stats plus how many oldest turns were left out to fit the context."""
        return {**stats, "dropped_turns": self.dropped} if self.dropped else stats

    def token(self, text: str, from_draft: bool) -> None:
        self.pane.chat_view.append_token(text, from_draft)
        self.pending = True

    def thinking(self, text: str) -> None:
        self.pane.chat_view.append_thinking(text)
        self.pending = True

    def save(self, reply_id: int | None, reason: str) -> None:
        """Save what the view has shown of reply ``reply_id``, its thinking apart (complete=False)."""
        text = self.pane.chat_view.live_text()
        if reply_id is None or text is None:
            return
        thinking, seconds = self.pane.chat_view.live_thinking()
        thought = {"thinking_s": round(seconds, 2)} if thinking and seconds is not None else {}
        stats = self.with_fit({**self.last_stats, "finish_reason": reason, **thought}) if self.last_stats else None
        self.saves.write(reply_id, text, stats=stats, runs=self.pane.chat_view.live_runs(), complete=False,
                         reasoning=thinking)
        self.pending = False
