"""Exports: a reply stopped inside a code block does not take the stats line (or the next message) into it; the
save dialog opens in the user's Documents (else home) folder with the chat's title cut between words."""

from __future__ import annotations

from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from app.chat.conversations import export_dialog, export_name, short_title
from app.history.export import closed
from app.history.store import History
from tests.app_helpers import QT_STRICT

STOPPED = "Here is the function:\n\n```python\ndef reverse(xs):\n    return xs[::-1]\n"
STATS = {"mode": "ssd", "new_tokens": 17, "tokens_per_second": 21.5, "finish_reason": "stopped"}


def code_and_text(markdown: str) -> tuple[str, str]:
    """What a Markdown reader shows as code, and as text (inline content), in ``markdown``."""
    tokens = MarkdownIt("commonmark").parse(markdown)
    code = "".join(t.content for t in tokens if t.type in ("fence", "code_block"))
    text = "".join(t.content for t in tokens if t.type == "inline")
    return code, text


def test_a_reply_stopped_inside_a_code_block_is_closed_before_its_stats_line(data_dir: Path) -> None:
    h = History()
    conv = h.create_conversation()
    reply = h.add_turn(conv.id, "Reverse a list in Python")
    h.update_message(reply.id, STOPPED, stats=STATS, complete=False)
    h.add_turn(conv.id, "and in C?")
    code, text = code_and_text(h.export_markdown(conv.id))
    assert "return xs[::-1]" in code
    assert "ssd" not in code and "21.5 tok/s" in text and "stopped" in text  # the stats line is text
    assert "and in C?" in text and "## You" not in code
    h.close()


@pytest.mark.parametrize(("text", "fence"), [
    ("```\nopen", "```"), ("~~~~ text\nopen\n~~~", "~~~~"), ("````\n```\nstill open", "````"),
])
def test_an_open_fence_is_closed_with_its_own_run(text: str, fence: str) -> None:
    assert closed(text).endswith("\n" + fence)
    assert closed(closed(text)) == closed(text)  # a closed fence stays as it is


def test_closed_text_is_left_alone() -> None:
    for text in ("no code", "```py\nx = 1\n```", "inline ``` fences ``` only", "```a`b\nnot a fence"):
        assert closed(text) == text


def test_titles_are_cut_between_words() -> None:
    long = "Explain how speculative decoding verifies a draft of several tokens in one batch, and why it is exact"
    title = short_title(long)
    assert len(title) <= 60 and title.endswith("…") and long.startswith(title[:-1])
    assert long[len(title) - 1] == " "  # the last word shown is whole
    assert short_title("  Short   question \nsecond line") == "Short question"
    assert export_name(title, ".md") == title[:-1].rstrip() + ".md"
    assert export_name("What's a GGUF file? / notes", ".json") == "What's a GGUF file notes.json"
    assert export_name("???", ".md") == "chat.md"


@pytest.mark.parametrize("documents", [True, False])
def test_the_save_dialog_opens_in_documents_or_home(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, documents: bool
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user-dirs.dirs: Documents is ~/Documents
    monkeypatch.chdir(tmp_path)  # the working folder is not where it opens
    if documents:
        (home / "Documents").mkdir()
    folder = home / "Documents" if documents else home
    parent = QWidget()
    qtbot.addWidget(parent)
    title = short_title("Reverse a list in Python, keeping the original list exactly as it was before the call")
    dialog = export_dialog(parent, title, ".md")
    assert Path(dialog.directory().absolutePath()) == folder
    assert dialog.selectedFiles() == [str(folder / "Reverse a list in Python, keeping the original list exactly.md")]


pytestmark = QT_STRICT
