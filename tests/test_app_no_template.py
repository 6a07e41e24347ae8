"""A model file with no chat template (a base model) in the app (issue 57): the app says so in plain words and
offers a plain-text conversation or a builtin chat template, remembered per model file; never garbage, never a
silent fallback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from app.chat.template_offer import NO_TEMPLATE
from app.settings.store import ActivePair
from app.worker.engine_worker import EngineState
from engine.chat.prepare import plain_text
from tests.app_helpers import QT_STRICT, TIMEOUT_MS, closing, fast_settings, open_window
from tests.tiny_models import write_model
from tests.tool_models import tools_vocab

__all__ = ["closing"]
pytestmark = QT_STRICT


@pytest.fixture(scope="module")
def base_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model whose file has no chat template (an empty one is not written); its vocabulary has ChatML's
    turn tokens, so ChatML is the template suggested for it."""
    path = tmp_path_factory.mktemp("base") / "base.gguf"
    return write_model(path, vocab=tools_vocab(), seed=3, n_layer=2, logit_scale=6.0, chat_template="")


def base_window(qtbot: QtBot, closing: list[Any], model: Path) -> Any:
    w = open_window(qtbot, ActivePair("base", "Tiny base model", str(model), None), fast_settings(mode="ar"))
    closing.append(w)
    qtbot.waitUntil(lambda: w.formats.format is not None, timeout=TIMEOUT_MS)
    return w


def wait_reply(qtbot: QtBot, w: Any, act: Any) -> int:
    with qtbot.waitSignal(w.reply_saved, timeout=TIMEOUT_MS) as blocker:
        act()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    return int(blocker.args[0])


def test_a_base_model_is_named_as_such_and_a_message_gets_no_garbage(qtbot: QtBot, closing: list[Any],
                                                                     base_model: Path) -> None:
    w = base_window(qtbot, closing, base_model)
    offer = w.pane.template_offer
    assert not offer.isHidden() and offer.label.text() == NO_TEMPLATE  # said at load, before anything is sent
    assert "(suggested)" in offer.combo.currentText() and offer.combo.currentData() == "chatml"
    w.prompt_edit.setPlainText("Once upon a time")
    with qtbot.waitSignal(w.error_shown, timeout=TIMEOUT_MS) as blocker:
        w.send()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    assert "no chat template" in str(blocker.args[0])
    assert [m.role for m in w.history.messages(w.conversation_id)] == ["user"]  # no reply at all, not garbage
    assert not offer.isHidden()


def test_plain_text_answers_the_waiting_message_and_is_remembered(qtbot: QtBot, closing: list[Any],
                                                                  base_model: Path) -> None:
    w = base_window(qtbot, closing, base_model)
    w.prompt_edit.setPlainText("Once upon a time")
    with qtbot.waitSignal(w.error_shown, timeout=TIMEOUT_MS):
        w.send()
    qtbot.waitUntil(lambda: w.state == EngineState.READY, timeout=TIMEOUT_MS)
    reply_id = wait_reply(qtbot, w, w.pane.template_offer.plain_button.click)
    assert w.pane.template_offer.isHidden()
    assert w.history.message(reply_id).complete and w.history.message(reply_id).role == "assistant"
    assert w.store.chat_template(str(base_model)) == "plain"
    assert w.formats.choice().template == "plain"
    reply_id = wait_reply(qtbot, w, lambda: (w.prompt_edit.setPlainText("The end."), w.send()))
    assert w.history.message(reply_id).complete


def test_a_picked_template_is_used_and_remembered_for_the_model_file(qtbot: QtBot, closing: list[Any],
                                                                     base_model: Path) -> None:
    w = base_window(qtbot, closing, base_model)
    offer = w.pane.template_offer
    offer.combo.setCurrentIndex(offer.combo.findData("llama3"))
    offer.use_button.click()
    qtbot.waitUntil(lambda: w.formats.format is not None and w.formats.format.template == "llama3",
                    timeout=TIMEOUT_MS)
    assert offer.isHidden() and w.formats.format is not None and w.formats.format.has_template
    reply_id = wait_reply(qtbot, w, lambda: (w.prompt_edit.setPlainText("Hello"), w.send()))
    assert w.history.message(reply_id).complete
    assert w.store.chat_template(str(base_model)) == "llama3"
    w.close()
    again = open_window(qtbot, ActivePair("base", "Tiny base model", str(base_model), None), fast_settings(mode="ar"))
    closing.append(again)
    qtbot.waitUntil(lambda: again.formats.format is not None, timeout=TIMEOUT_MS)
    fmt = again.formats.format
    assert fmt is not None and fmt.template == "llama3" and again.pane.template_offer.isHidden()


def test_a_plain_text_conversation_reads_as_one_text() -> None:
    chat: list[Any] = [{"role": "system", "content": "A story."}, {"role": "user", "content": "Once upon"},
                       {"role": "assistant", "content": " a time"}, {"role": "user", "content": "The end."}]
    assert plain_text(chat) == "A story.\n\nOnce upon a time\nThe end."
