"""Editing an earlier user message: its text goes back into the input box, and sending replaces it and every
message after it."""

from __future__ import annotations

from app.chat.pane import ChatPane

NOTE = "Editing an earlier message: sending replaces it and everything after it (Esc cancels)."


class Editing:
    """Which message is being edited (``message_id``), and the note that says so."""

    def __init__(self, pane: ChatPane) -> None:
        self.pane = pane
        self.message_id: int | None = None

    def begin(self, message_id: int, text: str) -> None:
        self.message_id = message_id
        self.pane.prompt_edit.setPlainText(text)
        self.pane.edit_note.setText(NOTE)
        self.pane.edit_note.show()
        self.pane.prompt_edit.setFocus()

    def cancel(self) -> None:
        """Leave editing mode (the input box is cleared)."""
        if self.message_id is not None:
            self.message_id = None
            self.pane.prompt_edit.clear()
        self.pane.edit_note.hide()
