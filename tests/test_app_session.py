"""The window as it was left, and what it says (issue 62 item 13): the last conversation and the server switch
reopen, the Server details dock shows its Supports text whole and its Now line in words, an export is named
after whole phrases, a stopped engine's cause is said once without nested parentheses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.chat.conversations import NAME_CHARS, export_name, first_phrases, short_title
from app.main_window import MainWindow
from app.narrow import is_cut
from app.worker.restart_banner import RestartBanner
from engine import ENGINE_STOPPED, TinyPair, server
from tests.app_helpers import QT_STRICT, TIMEOUT_MS, closing, fast_settings, open_window, send, tiny_pair
from tests.rpc_helpers import free_port

pytestmark = [*QT_STRICT, pytest.mark.timeout(180)]
__all__ = ["closing", "free_port"]


def nesting(text: str) -> int:
    """How deep parentheses nest in ``text``."""
    depth = deepest = 0
    for c in text:
        depth += (c == "(") - (c == ")")
        deepest = max(deepest, depth)
    return deepest


def test_the_last_conversation_and_the_server_switch_reopen(
    qtbot: QtBot, data_dir: Path, tiny: TinyPair, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="sd"))
    send(qtbot, w, "the first chat")
    w.new_conversation()
    send(qtbot, w, "the second chat")
    first = w.history.conversations("")[-1].id
    w.open_conversation(first)  # the one shown as the window closes
    w.server_panel.port_edit.setValue(port := free_port())
    with qtbot.waitSignal(w.host.server_changed, timeout=TIMEOUT_MS):
        w.server_panel.switch.click()
    assert w.server_panel.listening
    w.close()
    assert w.store.left_open() == (first, True)

    again = open_window(qtbot, tiny_pair(tiny))
    closing.append(again)
    assert again.conversation_id == first
    assert again.history.messages(first)[0].content == "the first chat" and again.chat_view.isVisible()
    assert again.conversation_list.currentItem().text() == "the first chat"
    qtbot.waitUntil(lambda: again.server_panel.listening, timeout=TIMEOUT_MS)  # once the pair has loaded
    assert again.server_panel.server is not None and again.server_panel.server.port == port
    with qtbot.waitSignal(again.host.server_changed, timeout=TIMEOUT_MS):
        again.server_panel.switch.click()  # off: the next start leaves it off
    again.history.delete(first)
    again.close()
    assert again.store.left_open() == (first, False)
    third = open_window(qtbot, None)  # the conversation is gone: nothing is opened, nothing fails
    closing.append(third)
    assert third.conversation_id is None and not third.server_panel.listening


def test_the_server_dock_shows_supports_whole_and_now_in_words(
    qtbot: QtBot, data_dir: Path, closing: list[MainWindow]
) -> None:
    w = open_window(qtbot, None)
    closing.append(w)
    w.resize(1280, 720)
    panel = w.server_panel
    assert panel.dock is not None
    panel.dock.show()
    qtbot.waitUntil(lambda: panel.supports.isVisible() and panel.supports.width() > 1, timeout=TIMEOUT_MS)
    qtbot.wait(50)  # the layout settles
    assert panel.supports.text() == server.SUPPORTS and not is_cut(panel.supports)
    assert panel.supports.height() >= panel.supports.heightForWidth(panel.supports.width())
    assert panel.running_label.text() == "—"


def test_an_export_is_named_after_whole_phrases() -> None:
    long = ("Explain how speculative decoding verifies a draft of several tokens in one batch, and why it is exact, "
            "in detail with examples of each step please")
    title = short_title(long)
    assert title == "Explain how speculative decoding verifies a draft of…"
    assert export_name(title, ".md", long) == (
        "Explain how speculative decoding verifies a draft of several tokens in one batch.md")
    short = "Reverse a list in Python, keeping the original list exactly as it was before the call"
    assert export_name(short_title(short), ".json", short) == short + ".json"  # all of it fits
    words = "Write a name generator that produces identifiers without any punctuation at all in the line " * 2
    name = export_name(short_title(words), ".md", words)
    assert len(name) <= NAME_CHARS + 3 and words.startswith(name[:-3]) and words[len(name) - 3] == " "  # whole words
    assert export_name("My renamed chat", ".md", long) == "My renamed chat.md"  # a title of the user's own stays
    assert export_name(title, ".md") == "Explain how speculative decoding verifies a draft of.md"  # no message
    assert first_phrases("One: two, three.\nsecond line", 9) == "One: two"
    assert re.fullmatch(r"[^<>:\"/\\|?*]+\.md", export_name("a/b: c?…", ".md", "a/b: c? d"))


def test_a_stopped_engine_says_its_cause_once(qtbot: QtBot, data_dir: Path, closing: list[MainWindow]) -> None:
    w = open_window(qtbot, None)
    closing.append(w)
    banner: RestartBanner = w.replies.restart_banner
    cause = "killed by SIGKILL (ended by the system or another program, often for lack of memory)"
    w.show_error(f"Generation failed: {ENGINE_STOPPED}{cause}")  # a reply the stop cut short
    w.host.engine_stopped.emit(cause)
    qtbot.waitUntil(banner.isVisible, timeout=TIMEOUT_MS)
    assert banner.label.text() == (f"The engine stopped: {cause}. The chat is kept; the next message starts it "
                                   "again with the same pair.")
    assert nesting(banner.label.text()) == 1 and not w.error_banner.isVisible()
    w.show_error("another problem")  # other errors still show while the banner is up
    assert w.error_banner.isVisible()
