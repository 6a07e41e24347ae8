"""Regenerate keeps every version of a reply: ← 1/3 → on the message, kept in history, exported."""

from __future__ import annotations

import json
import re
from pathlib import Path

from PySide6.QtCore import QUrl
from pytestqt.qtbot import QtBot

from app.history.store import History
from app.main_window import MainWindow
from app.worker.engine_worker import EngineState
from engine import TinyPair
from tests.app_helpers import QT_STRICT, REPLY_MS, closing, fast_settings, open_window, send, tiny_pair

pytestmark = QT_STRICT

__all__ = ["closing"]


def regenerate(qtbot: QtBot, w: MainWindow) -> None:
    with qtbot.waitSignal(w.reply_saved, timeout=REPLY_MS):
        w.regen_button.click()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=REPLY_MS)


def shows(w: MainWindow, texts: list[str], n: int) -> bool:
    """Whether the view shows version ``n`` of ``texts`` (by a word only that version has; the rest are
    tiny-model soup that Markdown and control characters may alter) and no other version."""
    words = [set(re.findall(r"[A-Za-z]{3,}", t)) for t in texts]
    plain = set(re.findall(r"[A-Za-z]{3,}", w.chat_view.toPlainText()))
    own = [ws - set().union(*(o for k, o in enumerate(words) if k != i)) for i, ws in enumerate(words)]
    assert all(own), texts
    return bool(own[n] & plain) and not any(own[k] & plain for k in range(len(texts)) if k != n)


def click(w: MainWindow, href: str) -> None:
    assert f'href="{href}"' in w.chat_view.toHtml()  # the link is on screen
    w.chat_view.anchorClicked.emit(QUrl(href))


def test_create_switch_persist_and_export(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, tmp_path: Path, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="sd", temperature=1.0, max_tokens=12))
    closing.append(w)
    reply_id = send(qtbot, w, "tell me something", REPLY_MS)
    assert "1/" not in w.chat_view.toPlainText()  # one version: no arrows
    texts = [w.history.message(reply_id).content]
    for _ in range(2):
        regenerate(qtbot, w)
        texts.append(w.history.message(reply_id).content)
    assert len(set(texts)) == 3  # Regenerate draws with another seed
    assert "← 3/3 →" in w.chat_view.toPlainText() and shows(w, texts, 2)
    assert 'href="version:' + f'{reply_id}:1"' not in w.chat_view.toHtml()  # nothing after the last
    click(w, f"version:{reply_id}:-1")
    assert "← 2/3 →" in w.chat_view.toPlainText() and shows(w, texts, 1)
    click(w, f"version:{reply_id}:-1")
    assert "← 1/3 →" in w.chat_view.toPlainText() and shows(w, texts, 0)
    assert w.readout.text().startswith("<b>sd</b>")
    conv_id = w.conversation_id
    assert conv_id is not None
    w.history.export_file(conv_id, tmp_path / "chat.md")
    w.history.export_file(conv_id, tmp_path / "chat.json")
    w.close()
    closing.remove(w)

    h = History()  # what the database kept
    assert [v.content for v in h.versions(reply_id)] == texts and h.message(reply_id).content == texts[0]
    h.close()
    again = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="sd", temperature=1.0, max_tokens=12))
    closing.append(again)
    again.open_conversation(conv_id)
    assert "← 1/3 →" in again.chat_view.toPlainText() and shows(again, texts, 0)
    click(again, f"version:{reply_id}:1")
    assert "← 2/3 →" in again.chat_view.toPlainText()
    regenerate(qtbot, again)  # a fourth version, shown
    assert "← 4/4 →" in again.chat_view.toPlainText()

    md = (tmp_path / "chat.md").read_text()
    assert f"## Assistant (version 1 of 3, shown)\n\n{texts[0]}" in md
    assert f"### Assistant, version 2 of 3\n\n{texts[1]}" in md and f"version 3 of 3\n\n{texts[2]}" in md
    data = json.loads((tmp_path / "chat.json").read_text())
    reply = data["messages"][1]
    assert reply["content"] == texts[0] and reply["version"] == 1
    assert [(v["content"], v["shown"]) for v in reply["versions"]] == [(texts[0], True), (texts[1], False),
                                                                        (texts[2], False)]


def test_a_regeneration_that_fails_shows_the_previous_version_again(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="ar", max_tokens=8, n_ctx=256))
    closing.append(w)
    reply_id = send(qtbot, w, "short", REPLY_MS)
    before = w.history.message(reply_id).content
    conv_id = w.conversation_id
    assert conv_id is not None
    w.history.set_system_prompt(conv_id, "be exhaustive " * 150)  # the chat no longer fits at all
    with qtbot.waitSignal(w.error_shown, timeout=REPLY_MS) as blocker:
        w.regen_button.click()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=REPLY_MS)
    assert "the system prompt and the last message alone have" in str(blocker.args[0])  # type: ignore[index]
    shown = w.history.message(reply_id)
    assert (shown.content, shown.versions, shown.complete) == (before, 1, True)
    assert "1/" not in w.chat_view.toPlainText() and w.chat_view.toPlainText().count("Assistant") == 1
