"""A tool round at speculative speed (issue 61 item 3), on a real tiny model with Qwen2.5's template and the real
stdio test server: the round after a tool's result reads only what the conversation gained, the rest from the
engine's cache, and the readout says so; the n-gram pool holds the result's tokens, so a reply quoting them is
drafted from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PySide6.QtCore import QUrl
from pytestqt.qtbot import QtBot

from app.chat.stats_text import stats_text
from app.settings.store import ActivePair
from engine import ToolCall
from engine.core.options import PREFILL_GRID
from engine.speculative.costmodel import CostModel
from engine.speculative.lookup import Lookup
from engine.speculative.types import JIT, NGRAM, RoundResult
from engine.stats import GenerationStats, StatsRecorder
from tests.app_helpers import QT_STRICT, REPLY_MS, closing, fast_settings, open_window, send
from tests.mcp_helpers import configure, stdio_spec
from tests.tool_models import write_tools_model

__all__ = ["closing"]
pytestmark = QT_STRICT
NOTES = "Buy milk, eggs and bread; call the plumber about the kitchen tap on Tuesday. " * 4


def test_the_round_after_a_tool_result_reads_only_the_new_tokens(qtbot: QtBot, closing: list[Any],
                                                                  tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES, encoding="utf-8")
    target = write_tools_model(tmp_path / "target.gguf")
    draft = write_tools_model(tmp_path / "draft.gguf", noise=0.05)
    configure(stdio_spec())
    w = open_window(qtbot, ActivePair("tools", "Tiny tools pair", str(target), str(draft)),
                    fast_settings(mode="lookup", max_tokens=16, n_ctx=2048))
    closing.append(w)
    first = w.history.message(send(qtbot, w, "What do my notes say?", REPLY_MS))
    assert first.stats is not None
    before = int(first.stats["prompt_tokens"]) + int(first.stats["new_tokens"])  # what the engine's context holds
    # a random-weight model writes no call of its own: the reply is given the call a model would write
    w.tools.offer(first.id, [ToolCall("call_1", "read_file", json.dumps({"path": str(notes)}))])
    with qtbot.waitSignal(w.reply_saved, timeout=REPLY_MS) as saved:
        w.chat_view.anchorClicked.emit(QUrl("tool:allow:call_1"))
    stats = w.history.message(int(saved.args[0])).stats
    assert stats is not None
    total, cached = int(stats["prompt_tokens"]), int(stats["prompt_cached"])
    gained = total - before  # the call as the template writes it, the result, the new assistant turn
    assert gained > 0 and cached >= int(first.stats["prompt_tokens"]) - PREFILL_GRID  # the first prompt, at least
    assert total - cached <= gained + int(first.stats["new_tokens"]) + PREFILL_GRID  # not the whole prompt again
    assert f"prompt: read {total - cached} of {total} tokens, {cached} from the cache" in w.readout.text()
    print(f"first prompt {first.stats['prompt_tokens']}, after the result {total}: {cached} cached,"
          f" {total - cached} read; lookup drafted {stats.get('accepted_lookup')} of {stats.get('accepted')}")


def test_the_pool_drafts_a_tool_results_tokens_after_the_turn_is_written_again() -> None:
    lookup = Lookup(CostModel())
    prompt, reply = list(range(100, 140)), [7, 8, 9]
    lookup.start(prompt + reply)  # the first round: its prompt and its reply
    result = list(range(500, 530))
    rendered = [*prompt, 7, 8, 10, *result, 11]  # the template writes the call otherwise; then the result
    lookup.start(rendered)
    quoted = result[:4]
    tokens, _orders = lookup.pool.draft([*rendered, 12, *quoted], 8)
    assert tokens == result[4:12]


def test_the_stats_line_says_what_came_from_the_cache_and_from_lookup() -> None:
    recorder = StatsRecorder(stats := GenerationStats(mode="auto", prompt_tokens=900, prompt_cached=860))
    recorder.round(RoundResult([1, 2, 3], "lookup", NGRAM, drafted=3, accepted=2))
    recorder.round(RoundResult([4, 5], "sd", JIT, drafted=4, accepted=1))
    line = stats_text(stats.to_dict())
    assert "prompt: read 40 of 900 tokens, 860 from the cache" in line
    assert "lookup drafted 2 of 3 accepted tokens" in line
    assert "cache" not in stats_text({**stats.to_dict(), "prompt_cached": 0, "accepted_lookup": 0})
