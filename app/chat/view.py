"""The conversation view: Markdown messages, a streaming reply repainted at about 30 Hz, link actions."""

from __future__ import annotations

import html
from dataclasses import dataclass

from PySide6.QtCore import QTimer, QUrl, Signal
from PySide6.QtGui import QGuiApplication, QTextBlock
from PySide6.QtWidgets import QTextBrowser, QWidget

from app.chat.bubbles import ASSISTANT_BG, MUTED, USER_BG, bubble, reply_links, user_links
from app.chat.render import Renderer, mark_runs
from app.chat.stats_text import message_status
from app.chat.thinking import LiveThinking, ThinkingBlocks
from app.chat.tool_cards import ToolCards
from app.history.records import Message

REPAINT_MS = 33
END_SLACK_PX = 4  # a scroll position this close to the bottom counts as "at the end" (rounding in the layout)


@dataclass(slots=True)
class _Live:
    """The reply being streamed."""

    text: str
    runs: list[tuple[int, bool]]
    status: str


class ChatView(QTextBrowser):
    """Shows one conversation; the streaming reply is buffered and repainted by a timer, not per token.

    The view follows the end of the conversation while the user has not scrolled away from it, and
    again from each new reply on; it follows the document's height itself, since Qt lays a long page
    out in steps after :meth:`setHtml` returns.

    Signals:
        edit_requested(int): the user clicked "Edit" on a user message (payload: message id).
        regenerate_requested(): the user clicked "Regenerate" on the last reply.
        version_requested(int, int): the user clicked ← or → on a reply with versions (message id, -1 or 1).
        tool_action_requested(str, str): Allow once, Always allow or Deny on a tool call's card (action, call id).
    """

    edit_requested = Signal(int)
    regenerate_requested = Signal()
    version_requested = Signal(int, int)
    tool_action_requested = Signal(str, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.anchorClicked.connect(self._on_anchor_clicked)
        self.document().setDefaultStyleSheet(
            "pre, code { font-family: 'DejaVu Sans Mono', 'Consolas', monospace; }"
            " a { color: #0969da; text-decoration: none; }")
        self._renderer = Renderer()
        self._messages: list[Message] = []
        self._cache: dict[tuple[int, bool, str], tuple[str, list[str]]] = {}
        self._code: dict[str, list[str]] = {}
        self._live: _Live | None = None
        self.thinking = ThinkingBlocks()  # each reply's thinking block: open or closed
        self.tools = ToolCards()  # each tool call's card and whether its result is open
        self._live_visible = True
        self._tint = False
        self._dirty = False
        self._repaint_timer = QTimer(self)
        self._repaint_timer.setObjectName("chat-repaint")
        self._repaint_timer.setInterval(REPAINT_MS)
        self._repaint_timer.timeout.connect(self._on_repaint_timeout)
        self.repaints = 0
        self.following = True  # keep the end in view; the user scrolling up turns this off
        self._painting = False
        self._pin: tuple[int, float] | None = None  # a reply whose header keeps its place on screen: (id, y in view)
        self._pinned_value: int | None = None  # ... the scroll value that does, until the layout reaches it
        bar = self.verticalScrollBar()
        bar.rangeChanged.connect(self._on_range_changed)
        bar.valueChanged.connect(self._on_scrolled)

    # -- content ----------------------------------------------------------------------------------
    def set_messages(self, messages: list[Message]) -> None:
        """Show these messages (the live reply, if any, stays below them)."""
        self._messages = list(messages)
        self._repaint()

    def set_tint(self, tint: bool) -> None:
        """Tint text that came from accepted drafts."""
        self._tint = tint
        self._repaint()

    def begin_stream(self) -> None:
        """Start showing a new streaming reply; the view follows it (and the message it answers)."""
        self._live = _Live("", [], "")
        self.thinking.live = LiveThinking()
        self._live_visible = True
        self.following = True
        self._repaint_timer.start()
        self._repaint()

    def set_live_visible(self, visible: bool) -> None:
        """Show the streaming reply below the messages, or keep buffering it unseen (another conversation)."""
        if visible != self._live_visible:
            self._live_visible = visible
            self._repaint()

    def append_token(self, text: str, from_draft: bool) -> None:
        """Add streamed text; the repaint happens on the next timer tick."""
        if self._live is None:
            return
        if self.thinking.live is not None:
            self.thinking.live.answer_began()
        self._live.text += text
        runs = self._live.runs
        if runs and runs[-1][1] == from_draft:
            runs[-1] = (runs[-1][0] + len(text), from_draft)
        else:
            runs.append((len(text), from_draft))
        self._dirty = True

    def append_thinking(self, text: str) -> None:
        """Add streamed thinking (shown in its block above the answer, open until the answer starts)."""
        if self._live is not None and self.thinking.live is not None:
            self.thinking.live.add(text)
            self._dirty = True

    def live_thinking(self) -> tuple[str, float | None]:
        """The streaming reply's thinking so far and how long it took (None: it has not thought)."""
        live = self.thinking.live
        return (live.text, live.seconds) if live is not None else ("", None)

    def set_live_status(self, status: str) -> None:
        """Line under the streaming reply (live stats)."""
        if self._live is not None:
            self._live.status = status
            self._dirty = True

    def live_text(self) -> str | None:
        """What is shown of the streaming reply so far, or None when not streaming."""
        return self._live.text if self._live is not None else None

    def live_runs(self) -> list[tuple[int, bool]]:
        """Draft/non-draft runs of the streaming reply."""
        if self._live is None:
            return []
        return list(self._live.runs)

    def end_stream(self) -> None:
        """Stop streaming (the caller then shows the saved message with :meth:`set_messages`)."""
        self._live = None
        self.thinking.live = None
        self._repaint_timer.stop()
        self._repaint()

    def pin_header(self, message_id: int) -> None:
        """Keep a reply's header (its version switcher) where it is on screen through the next repaint, however
        long the version shown next is; the view stops following the end."""
        y = self._header_y(message_id)
        if y is not None:
            self._pin = (message_id, y - self.verticalScrollBar().value())
            self.following = False

    def code_block(self, key: str, index: int) -> str:
        """The source of a rendered code block (what "Copy" puts on the clipboard)."""
        return self._code[key][index]

    # -- painting ---------------------------------------------------------------------------------
    def _on_repaint_timeout(self) -> None:
        if self._dirty and self._live_visible:
            self._repaint()

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        bar = self.verticalScrollBar()
        if self._pinned_value is not None:  # the page is laid out in steps: reach the pinned place once it exists
            self._painting = True
            try:
                bar.setValue(min(self._pinned_value, maximum))
            finally:
                self._painting = False
            if maximum >= self._pinned_value:
                self._pinned_value = None
        elif self.following:
            bar.setValue(maximum)

    def _on_scrolled(self, value: int) -> None:
        if not self._painting:
            self._pinned_value = None  # the user scrolled: their place wins
            self.following = value >= self.verticalScrollBar().maximum() - END_SLACK_PX

    def _repaint(self) -> None:
        self._dirty = False
        self.repaints += 1
        bar = self.verticalScrollBar()
        old = bar.value()
        parts: list[str] = []
        self._code = {}
        live = self._live if self._live_visible else None
        last_assistant = max((m.id for m in self._messages if m.role == "assistant"), default=None)
        for m in self._messages:
            parts.append(self._message_html(m, is_last=m.id == last_assistant and live is None))
        if live is not None:
            body, code = self._render("live", live.text, self.live_runs())
            self._code["live"] = code
            status = html.escape(live.status or "…")
            thought = self.thinking.live.html() if self.thinking.live is not None else ""
            parts.append(bubble("Assistant", "", thought + (body or ("" if thought else "<p>…</p>")), status,
                                 ASSISTANT_BG))
        if not parts:
            parts.append(f'<p style="color:{MUTED}" align="center"><br/><br/>'
                         "Type a message below to start.</p>")
        self._painting = True
        try:
            self.setHtml("".join(parts))
            bar.setValue(bar.maximum() if self.following else old)
            self._apply_pin()
        finally:
            self._painting = False

    def _apply_pin(self) -> None:
        pin, self._pin = self._pin, None
        y = self._header_y(pin[0]) if pin is not None else None
        if pin is not None and y is not None:
            self._pinned_value = max(0, round(y - pin[1]))
            self.verticalScrollBar().setValue(self._pinned_value)
            if self.verticalScrollBar().value() == self._pinned_value:
                self._pinned_value = None

    def _header_y(self, message_id: int) -> float | None:
        """Where a reply's version links are in the document (None: it shows no version links)."""
        href = f"version:{message_id}:"
        doc = self.document()
        block: QTextBlock = doc.begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                if it.fragment().charFormat().anchorHref().startswith(href):
                    return doc.documentLayout().blockBoundingRect(block).top()
                it += 1
            block = block.next()
        return None

    def _message_html(self, m: Message, *, is_last: bool) -> str:
        key = (m.id, self._tint, m.content)
        if key not in self._cache:
            self._cache[key] = self._render(str(m.id), m.content, m.runs or [])
        body, code = self._cache[key]
        self._code[str(m.id)] = code
        if m.role == "tool":
            return self.tools.result_html(m)
        if m.role == "user":
            return bubble("You", user_links(m), body, "", USER_BG)
        links = reply_links(m, is_last=is_last)
        status = html.escape(message_status(m.stats, complete=m.complete, unsaved=m.unsaved))
        thought = self.thinking.saved_html(m.id, m.reasoning, (m.stats or {}).get("thinking_s"))
        return bubble("Assistant", links, thought + body + self.tools.calls_html(m), status, ASSISTANT_BG)

    def _render(self, key: str, text: str, runs: list[tuple[int, bool]]) -> tuple[str, list[str]]:
        self._renderer.reset()
        source = mark_runs(text, runs) if self._tint and runs else text
        body = self._renderer.markdown(source).replace('href="copy:', f'href="copy:{key}:')
        return body, list(self._renderer.code_blocks)

    # -- links ------------------------------------------------------------------------------------
    def _on_anchor_clicked(self, url: QUrl) -> None:
        scheme, _, rest = url.toString().partition(":")
        clipboard = QGuiApplication.clipboard()
        if scheme == "copy":
            key, _, index = rest.rpartition(":")
            clipboard.setText(self.code_block(key, int(index)))
        elif scheme == "copymsg":
            for m in self._messages:
                if str(m.id) == rest:
                    clipboard.setText(m.content)
        elif scheme == "edit":
            self.edit_requested.emit(int(rest))
        elif scheme == "regen":
            self.regenerate_requested.emit()
        elif scheme == "think":
            self.thinking.toggle(rest)
            self._repaint()
        elif scheme == "tool":
            action, _, call_id = rest.partition(":")
            self.tools.toggle(call_id) if action == "result" else self.tool_action_requested.emit(action, call_id)
            self._repaint()
        elif scheme == "version":
            message_id, _, step = rest.partition(":")
            self.version_requested.emit(int(message_id), int(step))

