"""EngineWorker's signal protocol on a real QThread with the tiny models."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.chat.stats_text import stats_text
from app.worker.engine_worker import EngineSignals, EngineState, FinishedReply
from app.worker.host import EngineHost
from engine import EngineConfig, GenerationParams, SamplingParams, TinyPair
from tests.app_helpers import QT_STRICT, TIMEOUT_MS, corrupt_model

pytestmark = QT_STRICT

GREEDY = SamplingParams(temperature=0.0)
CHAT = [("user", "Hello there")]


@pytest.fixture
def host() -> Iterator[EngineHost]:
    h = EngineHost()
    yield h
    h.shutdown()


def load(qtbot: QtBot, host: EngineHost, target: Path, draft: Path | None, **kw: Any) -> None:
    with qtbot.waitSignal(host.state_changed, timeout=TIMEOUT_MS, check_params_cb=lambda s: s == EngineState.READY):
        host.load(EngineConfig(str(target), str(draft) if draft else None, **kw), "tiny")


class Recorder:
    """Every worker signal in arrival order, as (name, args)."""

    def __init__(self, host: EngineHost) -> None:
        self.events: list[tuple[str, tuple[Any, ...]]] = []
        for name in EngineSignals.signal_names():
            getattr(host, name).connect(lambda *args, n=name: self.events.append((n, args)))

    def names(self) -> list[str]:
        return [n for n, _ in self.events]


def test_load_then_generate_emits_in_strict_order(qtbot: QtBot, host: EngineHost, tiny: TinyPair) -> None:
    w = host
    with qtbot.waitSignals(
        [w.state_changed, w.model_loaded, w.state_changed],
        order="strict",
        check_params_cbs=[
            lambda s: s == EngineState.LOADING,
            lambda label: label == "tiny (CPU build: the model on the CPU)",
            lambda s: s == EngineState.READY,
        ],
        timeout=TIMEOUT_MS,
    ):
        host.load(EngineConfig(str(tiny.target), None), "tiny")
    params = GenerationParams(mode="ar", max_tokens=3, sampling=GREEDY)
    rec = Recorder(host)
    with qtbot.waitSignals(
        [
            w.generation_started,
            w.token_generated,
            w.token_generated,
            w.token_generated,
            w.generation_finished,
        ],
        order="strict",
        timeout=TIMEOUT_MS,
        check_params_cbs=[
            lambda rid: rid >= 1,
            None,
            None,
            None,
            lambda r: isinstance(r, FinishedReply) and r.stats["new_tokens"] == 3,
        ],
    ):
        host.generate(CHAT, params)
    reply: FinishedReply = next(args[0] for n, args in rec.events if n == "generation_finished")
    assert reply.stats["finish_reason"] == "length"
    assert reply.stats["mode"] == "ar"
    assert "".join(args[0] for n, args in rec.events if n == "token_generated") == reply.text


def test_ssd_protocol_tokens_then_stats_then_finished(qtbot: QtBot, host: EngineHost, tiny: TinyPair) -> None:
    load(qtbot, host, tiny.target, tiny.draft_related)
    rec = Recorder(host)
    params = GenerationParams(mode="ssd", max_tokens=40, sampling=GREEDY, k=4, fanout=2)
    with qtbot.waitSignal(host.generation_finished, timeout=TIMEOUT_MS):
        host.generate(CHAT, params)
    qtbot.waitUntil(lambda: rec.names()[-1] == "state_changed")
    names = rec.names()
    assert names[:2] == ["state_changed", "generation_started"]
    assert names[-3:] == ["stats_changed", "generation_finished", "state_changed"]
    assert set(names[2:-3]) <= {"token_generated", "stats_changed", "cache_used"}
    assert names.count("cache_used") == 1  # what the prompt cache holds, once a reply
    reply: FinishedReply = rec.events[-2][1][0]
    tokens = [args for n, args in rec.events if n == "token_generated"]
    assert "".join(t[0] for t in tokens) == reply.text
    assert reply.stats["mode"] == "ssd" and reply.stats["hit_rate"] is not None
    assert sum(n for n, d in reply.runs if d) == sum(len(t[0]) for t in tokens if t[1])
    final: dict[str, Any] = rec.events[-3][1][0]
    assert final == reply.stats and final["new_tokens"] == 40
    assert final["acceptance_rate"] is not None and final["hit_rate"] is not None


def test_corrupt_model_fails_readably_and_worker_stays_usable(
    qtbot: QtBot, host: EngineHost, tiny: TinyPair, tmp_path: Path
) -> None:
    w = host
    bad = corrupt_model(tmp_path / "broken.gguf")
    with qtbot.waitSignals(
        [w.state_changed, w.failed, w.state_changed],
        order="strict",
        timeout=TIMEOUT_MS,
        check_params_cbs=[
            lambda s: s == EngineState.LOADING,
            lambda m: m.startswith("Could not load broken:") and "\n" not in m,
            lambda s: s == EngineState.FAILED,
        ],
    ):
        host.load(EngineConfig(str(bad), None), "broken")
    with qtbot.waitSignal(w.failed, timeout=TIMEOUT_MS, check_params_cb=lambda m: "No model is loaded" in m):
        host.generate(CHAT, GenerationParams(mode="ar", max_tokens=2, sampling=GREEDY))
    load(qtbot, host, tiny.target, None)
    with qtbot.waitSignal(w.generation_finished, timeout=TIMEOUT_MS):
        host.generate(CHAT, GenerationParams(mode="ar", max_tokens=2, sampling=GREEDY))


def test_engine_error_mid_request_is_started_then_failed(qtbot: QtBot, host: EngineHost, tiny: TinyPair) -> None:
    load(qtbot, host, tiny.target, None, n_ctx=64)
    w = host
    long_chat = [("user", "word " * 2000)]
    with qtbot.waitSignals(
        [w.generation_started, w.failed],
        order="strict",
        timeout=TIMEOUT_MS,
        check_params_cbs=[None, lambda m: "context" in m],
    ):
        host.generate(long_chat, GenerationParams(mode="ar", max_tokens=4, sampling=GREEDY))
    assert host.worker.thread() is host.engine_thread


def test_stop_mid_reply_takes_effect_within_one_round(qtbot: QtBot, host: EngineHost, tiny: TinyPair) -> None:
    load(qtbot, host, tiny.target, tiny.draft_related)
    k = 4
    seen = {"count": 0, "at_stop": 0}

    def on_token(_text: str, _draft: bool) -> None:  # runs on the worker thread (direct connection)
        seen["count"] += 1
        if seen["count"] == 5:
            seen["at_stop"] = seen["count"]
            host.request_stop()

    host.worker.token_generated.connect(on_token, Qt.ConnectionType.DirectConnection)
    params = GenerationParams(mode="sd", max_tokens=900, sampling=GREEDY, k=k)
    rec = Recorder(host)
    with qtbot.waitSignals([host.generation_started, host.generation_finished], order="strict", timeout=TIMEOUT_MS):
        host.generate(CHAT, params)
    reply: FinishedReply = next(args[0] for n, args in rec.events if n == "generation_finished")
    assert reply.stats["finish_reason"] == "stopped"
    assert seen["count"] - seen["at_stop"] <= k + 1
    assert reply.stats["new_tokens"] < 900


def test_auto_mode_reports_the_mode_it_runs(qtbot: QtBot, host: EngineHost, tiny: TinyPair) -> None:
    load(qtbot, host, tiny.target, tiny.draft_related)
    rec = Recorder(host)
    params = GenerationParams(mode="auto", max_tokens=30, sampling=GREEDY)
    with qtbot.waitSignal(host.generation_finished, timeout=TIMEOUT_MS):
        host.generate(CHAT, params)
    reply: FinishedReply = next(args[0] for n, args in rec.events if n == "generation_finished")
    stats: list[dict[str, Any]] = [args[0] for n, args in rec.events if n == "stats_changed"]
    assert reply.stats["mode"] == "auto" and reply.stats["new_tokens"] == 30
    assert stats[-1]["current_mode"] in reply.stats["rounds_by_mode"]
    assert stats_text(reply.stats).startswith("auto (")
    live = {**reply.stats, "finish_reason": ""}  # as the readout shows it while the reply runs
    assert stats_text(live).startswith(f"auto → {reply.stats['current_mode']} · 30 tokens")


def test_the_host_has_the_worker_signals_declared_once(host: EngineHost) -> None:
    names = EngineSignals.signal_names()
    assert {"state_changed", "token_generated", "stats_changed", "generation_finished", "failed"} <= set(names)
    assert not any(name in vars(EngineHost) for name in names)
    assert all(callable(getattr(host, name).emit) for name in names)
