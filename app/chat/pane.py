"""The right-hand side of the window: system prompt, banner, conversation, readout, input and buttons."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QStatusBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.prompt_edit import PromptEdit
from app.chat.readout import NO_REPLY, ReadoutLabel
from app.chat.template_offer import TemplateOffer
from app.chat.view import ChatView
from app.narrow import never_widen

READOUT_LINES = 2  # the stats take one line; an exactness verdict may take two
READOUT_PAD_PX = 2  # the readout's style-sheet padding, above and below
BANNER_STYLE = "background:#ffebe9; color:#82071e; border:1px solid #ff8182; padding:6px; border-radius:4px;"


class ChatPane(QWidget):
    """Lays out the chat widgets; the window wires them (this class holds no state of its own)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.system_edit = QLineEdit()
        self.system_edit.setPlaceholderText("System prompt for this conversation (optional)")
        self.error_banner = QLabel()
        self.error_banner.setObjectName("error-banner")
        self.error_banner.setWordWrap(True)
        self.error_banner.setStyleSheet(BANNER_STYLE)
        self.error_banner.hide()
        self.template_offer = TemplateOffer()  # a model without a chat template: what it can do instead
        self.chat_view = ChatView()
        self.readout = ReadoutLabel(NO_REPLY)
        self.readout.setObjectName("readout")
        self.readout.setTextFormat(Qt.TextFormat.RichText)
        self.readout.setStyleSheet(f"color:#24292f; padding:{READOUT_PAD_PX}px 4px;")
        never_widen(self.readout, max_lines=READOUT_LINES)  # one line from the first reply on: no layout jump
        self.readout.setMinimumHeight(self.readout.fontMetrics().lineSpacing() + 2 * READOUT_PAD_PX)
        self.edit_note = QLabel()
        self.edit_note.setStyleSheet("color:#9a6700;")
        self.edit_note.hide()
        self.prompt_edit = PromptEdit()
        self.prompt_edit.setFixedHeight(90)
        self.send_button = QPushButton("Send")
        self.send_button.setDefault(True)
        self.stop_button = QPushButton("Stop")
        self.regen_button = QPushButton("Regenerate")

        buttons = QVBoxLayout()
        for b in (self.send_button, self.stop_button, self.regen_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        bottom = QHBoxLayout()
        bottom.addWidget(self.prompt_edit, 1)
        bottom.addLayout(buttons)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        for widget in (self.system_edit, self.error_banner, self.template_offer):
            layout.addWidget(widget)
        layout.addWidget(self.chat_view, 1)
        for widget in (self.readout, self.edit_note):
            layout.addWidget(widget)
        layout.addLayout(bottom)

    def show_banner(self, message: str) -> None:
        """Show a readable message above the conversation (non-modal)."""
        self.error_banner.setText(message)
        self.error_banner.show()


class StatusLine:
    """The status bar's widgets: the model, a busy bar while loading, the draft-tint toggle, the state."""

    def __init__(self, bar: QStatusBar, state: str) -> None:
        self.model_label = QLabel("No model")
        self.state_label = QLabel(state)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(180)
        self.progress.setRange(0, 0)
        self.progress.hide()
        self.tint_button = QToolButton()
        self.tint_button.setText("Tint drafts")
        self.tint_button.setCheckable(True)
        bar.addWidget(self.model_label)
        bar.addWidget(self.progress)
        bar.addPermanentWidget(self.tint_button)
        bar.addPermanentWidget(self.state_label)
