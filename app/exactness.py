""""Verify exactness": the current prompt decoded greedily with ``ar`` and with the speculative mode."""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QLabel, QMessageBox, QWidget

from .engine_host import EngineHost
from .engine_worker import Verification
from .settings import Settings

MAX_TOKENS = 128


class ExactnessCheck(QObject):
    """Asks the engine for the check and shows its verdict in the readout and a message box."""

    def __init__(self, host: EngineHost, readout: QLabel, parent: QWidget) -> None:
        super().__init__(parent)
        self.host = host
        self.readout = readout
        self.window = parent
        self.last: Verification | None = None
        self.box: QMessageBox | None = None
        host.verification_finished.connect(self._on_verification_finished)

    def start(self, settings: Settings, *, has_draft: bool, system: str, typed: str,
              history: list[tuple[str, str]]) -> str | None:
        """Start the check on the typed prompt (or the conversation's last one); a problem, or None."""
        chat = chat_for_check(system.strip(), typed.strip(), history)
        if chat is None:
            return "Nothing to verify: type a prompt or open a conversation with a message."
        mode = settings.mode if settings.mode != "ar" else "ssd"
        params = settings.generation_params(has_draft=has_draft, greedy=True, mode=mode,
                                            max_tokens=min(settings.max_tokens, MAX_TOKENS))
        if params.mode == "ar":
            return "Verify exactness needs a draft model (the active pair has none)."
        self.readout.setText(f"Verifying <b>{params.mode}</b> against <b>ar</b> (greedy)…")
        self.host.verify(chat, params)
        return None

    def _on_verification_finished(self, result: Verification) -> None:
        self.last = result
        if result.identical:
            text = f"Identical: greedy {result.mode} produced the same {result.ar_tokens} tokens as ar."
        else:
            text = (f"Different: greedy {result.mode} and ar first differ at token {result.first_difference}"
                    f" (ar: {result.ar_text!r}; {result.mode}: {result.spec_text!r}).")
        if result.stopped:
            text += " (stopped early)"
        self.readout.setText(text)
        self.box = QMessageBox(QMessageBox.Icon.Information, "Verify exactness", text, parent=self.window)
        self.box.open()


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
