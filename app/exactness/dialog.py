""""Verify exactness": the current prompt decoded with ``ar`` and with the speculative mode, both greedy or, under
the coupled scheme, both sampled with one seed (a seed of 0 in the settings: one fresh seed for both passes).

A progress dialog shows each pass's tokens and cancels the check; the verdict goes to the readout (one
line) and a box that shows the first difference readably with the target's top-2 margin there.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QLabel, QMessageBox, QProgressBar, QProgressDialog, QWidget

from app.exactness.text import PASSES, details_html, pass_text, passed, summary
from app.settings.values import Settings
from app.worker.host import EngineHost
from engine import COUPLED, Verification, VerifyProgress, setting_of

MAX_TOKENS = 128


class ExactnessCheck(QObject):
    """Asks the engine for the check, shows its progress (with Cancel) and its verdict."""

    def __init__(self, host: EngineHost, readout: QLabel, parent: QWidget) -> None:
        super().__init__(parent)
        self.host = host
        self.readout = readout
        self.window = parent
        self.last: Verification | None = None
        self.box: QMessageBox | None = None
        self.progress: QProgressDialog | None = None
        host.verification_progressed.connect(self._on_verification_progressed)
        host.verification_finished.connect(self._on_verification_finished)
        host.failed.connect(self._on_failed)

    def start(self, settings: Settings, *, has_draft: bool, system: str, typed: str,
              history: list[tuple[str, str]]) -> str | None:
        """Start the check on the typed prompt (or the conversation's last one); a problem, or None."""
        chat = chat_for_check(system.strip(), typed.strip(), history)
        if chat is None:
            return "Nothing to verify: type a prompt or open a conversation with a message."
        mode = settings.mode if settings.mode != "ar" else "ssd"
        params = settings.generation_params(has_draft=has_draft, greedy=settings.scheme != COUPLED, mode=mode,
                                            max_tokens=min(settings.max_tokens, MAX_TOKENS))
        if params.mode == "ar":
            return "Verify exactness needs a draft model (the active pair has none)."
        self.readout.setText(f"Verifying <b>{html.escape(params.mode)}</b> against <b>ar</b> "
                             f"({html.escape(setting_of(params))})…")
        self._show_progress(VerifyProgress(1, params.mode, 0, params.max_tokens))
        self.host.verify(chat, params)
        return None

    def cancel(self) -> None:
        """Stop the check at the next round; it ends without a verdict."""
        if self.progress is not None:
            self.progress.setLabelText("Cancelling…")
        self.host.request_stop()

    def _show_progress(self, first: VerifyProgress) -> None:
        dialog = QProgressDialog(pass_text(first), "Cancel", 0, PASSES * first.max_tokens, self.window)
        dialog.setWindowTitle("Verify exactness")
        dialog.setObjectName("verify-progress")
        bar = QProgressBar(dialog)
        bar.setFormat("%p% of both passes")
        dialog.setBar(bar)
        dialog.setWindowModality(Qt.WindowModality.NonModal)
        dialog.setMinimumDuration(0)
        dialog.setAutoClose(False)
        dialog.setAutoReset(False)
        dialog.canceled.connect(self.cancel)
        dialog.show()
        self.progress = dialog

    def _close_progress(self) -> None:
        if self.progress is not None:
            self.progress.canceled.disconnect(self.cancel)
            self.progress.close()
            self.progress = None

    def _on_verification_progressed(self, p: VerifyProgress) -> None:
        if self.progress is not None and not self.progress.wasCanceled():
            self.progress.setMaximum(PASSES * p.max_tokens)
            self.progress.setValue((p.pass_no - 1) * p.max_tokens + min(p.tokens, p.max_tokens))
            self.progress.setLabelText(pass_text(p))

    def _on_verification_finished(self, result: Verification) -> None:
        self.last = result
        self._close_progress()
        self.readout.setText(html.escape(summary(result), quote=False))
        if result.stopped:
            return
        icon = QMessageBox.Icon.Information if passed(result) else QMessageBox.Icon.Warning
        self.box = QMessageBox(icon, "Verify exactness", details_html(result), parent=self.window)
        self.box.setTextFormat(Qt.TextFormat.RichText)
        self.box.open()

    def _on_failed(self, _message: str) -> None:
        self._close_progress()


def chat_for_check(system: str, typed: str, history: list[tuple[str, str]]) -> list[tuple[str, str]] | None:
    """The typed prompt after the conversation's earlier turns, or the conversation up to its last prompt."""
    head = [("system", system)] if system else []
    if typed:
        return [*head, *history_until_user(history), ("user", typed)]
    trimmed = history_until_user(history, include_last_user=True)
    return [*head, *trimmed] if trimmed else None


def history_until_user(history: list[tuple[str, str]], *,
                       include_last_user: bool = False) -> list[tuple[str, str]]:
    """The chat up to (and optionally including) its last user message."""
    last = max((i for i, (role, _) in enumerate(history) if role == "user"), default=None)
    if last is None:
        return [] if include_last_user else list(history)
    return history[:last + 1] if include_last_user else history[:last]
