"""No message widens the main window: a huge verdict, error, model name or server message leaves it as it was."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.narrow import is_cut
from tests.app_helpers import QT_STRICT, closing, open_window
from tests.test_app_verify import different

pytestmark = QT_STRICT

__all__ = ["closing"]


def test_no_message_widens_the_window(qtbot: QtBot, data_dir: Path, closing: list[MainWindow]) -> None:
    w = open_window(qtbot, None)
    closing.append(w)
    w.resize(1000, 700)
    QApplication.processEvents()
    size = w.size()
    huge = "\n".join(["x" * 4000, "word " * 800])  # an unbreakable run, then plenty of wrapping text
    w.host.verification_finished.emit(different(0.01, context=huge, ar_text=huge, spec_text=huge))
    w.show_error(huge)
    w.model_label.setText(huge)
    w.edit_note.setText(huge)
    w.edit_note.show()
    w.server_panel.message.setText(huge)
    w.server_panel.dock.show()  # type: ignore[union-attr]
    for _ in range(3):
        QApplication.processEvents()
    assert w.size() == size, "a long message resized the window"
    assert w.minimumSizeHint().width() < size.width() and w.minimumSizeHint().height() < size.height()
    central = w.centralWidget()
    assert central is not None and w.send_button.isVisible()
    assert w.send_button.mapTo(w, w.send_button.rect().bottomRight()).x() < size.width()
    assert is_cut(w.error_banner) and w.error_banner.height() < 200
