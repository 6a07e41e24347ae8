"""Server ▸ Local server is the switch: its check mark is on only while the server listens, a start that cannot
happen (no pair, a port in use) leaves it off and opens the panel with the reason; Server ▸ Server details shows
the panel."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from PySide6.QtGui import QAction
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.server.panel import NO_PAIR
from engine import TinyPair
from tests.app_helpers import QT_STRICT, TIMEOUT_MS, closing, fast_settings, open_window, tiny_pair
from tests.test_app_server import free_port, port_is_free

pytestmark = [*QT_STRICT, pytest.mark.timeout(180)]

__all__ = ["closing"]


def server_menu(w: MainWindow) -> dict[str, QAction]:
    """The Server menu's entries by their text (without "&")."""
    menu = next(a.menu() for a in w.menuBar().actions() if a.text() == "&Server")
    return {a.text().replace("&", "").split(" (")[0]: a for a in menu.actions()}  # type: ignore[union-attr]


def test_the_menu_item_starts_and_stops_the_server(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings())
    closing.append(w)
    panel, entries = w.server_panel, server_menu(w)
    switch = entries["Local server"]
    assert switch.isCheckable() and not switch.isChecked() and "Server details" in entries
    port = free_port()
    panel.port_edit.setValue(port)
    with qtbot.waitSignal(w.host.server_changed, timeout=TIMEOUT_MS):
        switch.trigger()
    assert panel.listening and switch.isChecked() and not port_is_free(port)
    assert switch.text() == f"&Local server (port {port})" and panel.switch.isChecked()
    assert panel.dock is not None and not panel.dock.isVisible()  # the details stay where they are
    entries["Server details"].trigger()
    assert panel.dock.isVisible() and f"127.0.0.1:{port}" in panel.url_label.text()
    with qtbot.waitSignal(w.host.server_changed, timeout=TIMEOUT_MS):
        switch.trigger()
    assert not panel.listening and not switch.isChecked() and port_is_free(port)
    assert switch.text() == "&Local server"


def test_without_a_pair_the_switch_says_why_and_stays_off(
    qtbot: QtBot, data_dir: Path, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, None)
    closing.append(w)
    switch = server_menu(w)["Local server"]
    assert switch.isEnabled()  # it can always say why not
    switch.trigger()
    panel = w.server_panel
    assert not switch.isChecked() and not panel.listening
    assert panel.dock is not None and panel.dock.isVisible() and panel.message.text() == NO_PAIR


def test_a_port_in_use_leaves_the_switch_off_with_the_reason_and_a_hint(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings())
    closing.append(w)
    switch, panel = server_menu(w)["Local server"], w.server_panel
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        panel.port_edit.setValue(taken.getsockname()[1])
        with qtbot.waitSignal(w.host.server_changed, timeout=TIMEOUT_MS):
            switch.trigger()
    assert not switch.isChecked() and not panel.listening
    assert panel.dock is not None and panel.dock.isVisible()
    assert "in use" in panel.message.text() and panel.message.text().endswith("Choose another port above and switch "
                                                                             "it on again.")
