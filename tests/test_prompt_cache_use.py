"""Settings shows what the prompt cache holds: the engine counts it, the engine process hands it over, and the
dialog says it under the cache's size after each reply in the window."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.settings.dialog import SettingsDialog
from app.settings.explain import cache_words
from app.settings.values import Settings
from engine import CacheUse, EngineConfig, EngineProcess, GenerationParams
from tests.app_helpers import fast_settings, open_window, send, tiny_pair
from tests.tiny_models import TinyPair

GRID = 64  # the prefill grid: a prompt is kept and restored in whole chunks of it
N_TOKENS = 4


def test_the_engine_process_reports_what_its_prompt_cache_kept_and_brought_back(tiny: TinyPair) -> None:
    with EngineProcess(EngineConfig(str(tiny.target), n_ctx=512, prompt_cache_mb=16, threads=1)) as eng:
        vocab = eng.n_vocab
        first = [1, *(3 + (i * 7) % (vocab - 3) for i in range(150))]  # two whole grid chunks and some
        other = [1, *(3 + (i * 11) % (vocab - 3) for i in range(40))]
        params = GenerationParams(mode="ar", max_tokens=N_TOKENS)  # type: ignore[arg-type]
        assert eng.prompt_cache_use() == CacheUse(0, 16 << 20, 0, 0, 0)
        for prompt in (first, other, first):  # the one sequence reads another conversation, then goes back
            list(eng.generate(prompt, params))
        use = eng.prompt_cache_use()
    assert use.restored == 1 and use.restored_tokens == len(first) // GRID * GRID
    assert use.conversations >= 1 and 0 < use.used_bytes <= use.limit_bytes


def test_the_words_say_the_use_the_size_and_what_was_not_read_again() -> None:
    assert cache_words(None) == ""
    assert cache_words(CacheUse(0, 0, 0, 0, 0)).startswith("Off")
    assert cache_words(CacheUse(3 << 20, 256 << 20, 1, 0, 0)) == "In use: 3.0 of 256 MB, 1 conversation kept."
    assert cache_words(CacheUse(5 << 19, 16 << 20, 2, 3, 1536)) == (
        "In use: 2.5 of 16 MB, 2 conversations kept; 3 brought back instead of read again, 1,536 prompt tokens not "
        "read twice.")


def test_settings_show_the_cache_after_a_reply_in_the_window(qtbot: QtBot, tiny: TinyPair) -> None:
    plain = SettingsDialog(Settings())
    qtbot.addWidget(plain)
    assert not plain.cache_note.isVisibleTo(plain)  # no reply yet: nothing to say
    window = open_window(qtbot, tiny_pair(tiny), fast_settings(mode="ar"))
    try:
        assert window.pairs.cache_use is None
        send(qtbot, window, "Hello")
        qtbot.waitUntil(lambda: window.pairs.cache_use is not None)
        window.open_settings()
        dialog = window.settings_dialog
        assert dialog is not None
        note = dialog.cache_note
        assert note.isVisibleTo(dialog) and note.text().startswith("In use: ") and "of 256 MB" in note.text()
        dialog.reject()
    finally:
        window.close()
