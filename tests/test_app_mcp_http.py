"""Tools in the chat window over streamable HTTP (issue 61 item 6): the real test MCP server on 127.0.0.1, a call
allowed with the header the secret store keeps, a second round, and the server edited in Settings > Tools (renamed,
its header kept, then changed: the next call carries the new one)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.settings.tools_page import KEPT, ServerForm, open_tools
from app.tools import config, secrets
from app.tools.config import ServerSpec
from tests import mcp_helpers
from tests.app_helpers import QT_STRICT, REPLY_MS, closing, send, stepping_window
from tests.mcp_helpers import ToolEngine, call_text, configure
from tests.test_app_mcp import answer, last_call_id

__all__ = ["closing"]
pytestmark = QT_STRICT


@pytest.fixture
def http_server() -> Iterator[str]:
    with mcp_helpers.http_server() as url:
        yield url


def results(w: Any) -> list[str]:
    return [m.content for m in w.history.messages(w.conversation_id or 0) if m.role == "tool"]


def edit(qtbot: QtBot, dialog: Any, name: str, extra: str | None) -> str:
    """Edit the dialog's first server through its Edit… button; returns the form's header text as it opened."""
    seen: list[str] = []

    def fill() -> None:
        form = QApplication.activeModalWidget()
        assert isinstance(form, ServerForm)
        seen.append(form.extra.toPlainText())
        form.name_edit.setText(name)
        if extra is not None:
            form.extra.setPlainText(extra)
        form._on_ok()

    dialog.tree.setCurrentItem(dialog.tree.topLevelItem(0))
    QTimer.singleShot(0, fill)
    dialog.edit_button.click()
    qtbot.waitUntil(lambda: bool(seen), timeout=REPLY_MS)
    return seen[0]


def test_a_call_over_http_a_second_round_and_an_edited_server(qtbot: QtBot, closing: list[Any],
                                                              http_server: str) -> None:
    configure(ServerSpec("web", url=http_server, headers=(("Authorization", "Bearer s3cret"),)))
    assert "s3cret" not in config.config_path().read_text(encoding="utf-8")
    engine = ToolEngine(call_text("token"), call_text("echo", text="two"), "Both done.", call_text("token"),
                        "Edited.")
    w = stepping_window(qtbot, engine)
    closing.append(w)
    send(qtbot, w, "Which token do you send?")
    answer(qtbot, w, "allow", last_call_id(w))  # the model goes on: a second round, which calls again
    answer(qtbot, w, "allow", last_call_id(w))
    assert results(w) == ["Bearer s3cret", "two"]
    assert w.history.messages(w.conversation_id or 0)[-1].content.strip() == "Both done."
    assert engine.sent[-1][-1]["content"] == "two" and engine.sent[-2][-1]["content"] == "Bearer s3cret"

    dialog = open_tools(w, w.tools.toolbox)
    qtbot.addWidget(dialog)
    assert edit(qtbot, dialog, "site", None) == f"Authorization: {KEPT}"  # the secret is not shown
    assert [s.name for s in w.tools.toolbox.specs] == ["site"] and secrets.headers("web") == {}
    assert config.load()[0].headers == (("Authorization", "Bearer s3cret"),)  # kept under the new name
    edit(qtbot, dialog, "site", "Authorization: Bearer n3w")
    assert dialog.tree.topLevelItem(0).text(0) == "site" and config.load()[0].url == http_server

    send(qtbot, w, "And now?")
    answer(qtbot, w, "allow", last_call_id(w))
    assert results(w)[-1] == "Bearer n3w"  # the edited header restarted the connection
    assert w.history.messages(w.conversation_id or 0)[-1].content.strip() == "Edited."
