"""Helpers for the app tests: windows on a private data folder, a corrupt GGUF, tiny-pair settings, and an
engine stand-in whose rounds take a set time."""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.settings.store import ActivePair
from app.settings.values import Settings
from app.worker.engine_worker import EngineState
from engine import (
    CONTENT_PIECE,
    CacheUse,
    ChatFormat,
    ChatMessage,
    ChatRequest,
    Generation,
    GenerationParams,
    GenerationStats,
    MeasuredRate,
    Placement,
    PreparedChat,
    TinyPair,
    TokenEvent,
)
from engine.chat.prepare import prepare_chat

TIMEOUT_MS = 60000  # generous: a loaded 2-core machine can take 20 s for what takes 1 s idle
REPLY_MS = 2 * TIMEOUT_MS  # a whole reply, prompt included, on a loaded machine

# Qt warnings fail the app tests; the offscreen platform's size-hint notice is the one exception.
QT_STRICT = [pytest.mark.qt_log_level_fail("WARNING"), pytest.mark.qt_log_ignore("propagateSizeHints")]


def corrupt_model(path: Path) -> Path:
    """A file with the GGUF magic followed by garbage: passes the magic check, fails in llama.cpp."""
    path.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    return path


def tiny_pair(tiny: TinyPair, *, draft: Path | None = None) -> ActivePair:
    """The tiny target with a related draft (partial acceptance)."""
    return ActivePair("tiny", "Tiny test pair", str(tiny.target), str(draft or tiny.draft_related))


def fast_settings(**changes: object) -> Settings:
    """Settings that keep tiny-model replies short and deterministic."""
    values: dict[str, object] = {"mode": "ssd", "temperature": 0.0, "max_tokens": 24, "n_ctx": 1024}
    values.update(changes)
    return Settings(**values)  # type: ignore[arg-type]


def open_window(qtbot: QtBot, pair: ActivePair | None, settings: Settings | None = None) -> MainWindow:
    """A shown MainWindow on the test's data folder; loads ``pair`` and waits until it is ready."""
    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    if settings is not None:
        window.apply_settings(settings)
    if pair is not None:
        with qtbot.waitSignal(window.host.model_loaded, timeout=TIMEOUT_MS):
            window.pairs.activate(pair)
        qtbot.waitUntil(lambda: window.state == EngineState.READY, timeout=TIMEOUT_MS)
    return window


def send(qtbot: QtBot, window: MainWindow, text: str, timeout_ms: int = TIMEOUT_MS) -> int:
    """Type ``text``, send it, wait for the saved reply; returns the reply's message id."""
    window.prompt_edit.setPlainText(text)
    with qtbot.waitSignal(window.reply_saved, timeout=timeout_ms) as blocker:
        window.send()
    qtbot.waitUntil(lambda: window.state == EngineState.READY, timeout=timeout_ms)
    return int(blocker.args[0])  # type: ignore[index]


class ReplyGate:
    """Holds the engine worker once a reply has streamed more than ``chars`` characters, until :meth:`release`
    or until the window asks the worker to stop (stop button, close, delete).

    The tiny models answer in milliseconds: without the gate a whole reply can arrive in one batch of
    queued events, and a test that acts "mid-reply" would find the reply already finished.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, window: MainWindow, chars: int = 20) -> None:
        self.chars = chars
        self._open = threading.Event()
        self._streamed = 0
        worker = window.host.worker
        request_stop = worker.request_stop

        def stop_and_open() -> None:
            request_stop()
            self._open.set()

        monkeypatch.setattr(worker, "request_stop", stop_and_open)
        worker.token_generated.connect(self._on_token, Qt.ConnectionType.DirectConnection)

    def _on_token(self, text: str, _from_draft: bool) -> None:  # runs on the worker thread
        self._streamed += len(text)
        if self._streamed > self.chars:
            self._open.wait(TIMEOUT_MS / 1000)

    def release(self) -> None:
        """Let the reply go on to its end."""
        self._open.set()


@pytest.fixture
def closing() -> Iterator[list[MainWindow]]:
    """Windows appended here are closed (worker thread joined) at the end of the test."""
    windows: list[MainWindow] = []
    yield windows
    for w in windows:
        w.close()


class SteppingEngine:
    """Stands in for the engine on the worker thread: every round sleeps ``step_s`` and then emits the next
    ``per_round`` words of ``reply``; like the engine, it checks the stop Event between rounds.

    ``rounds`` counts the rounds run (read from the UI thread: an int, written by one thread only).
    """

    n_ctx = 4096

    def __init__(self, reply: str, *, step_s: float = 0.2, per_round: int = 1) -> None:
        self.words = [w + " " for w in reply.split(" ")]
        self.step_s = step_s
        self.per_round = per_round
        self.rounds = 0
        self.placement = Placement(0, 0, 0, 0, gpu_build=False, has_draft=True)  # as a CPU build places a pair

    def tokenize(self, text: str) -> list[int]:
        return list(range(len(text.split())))

    def messages_tokens(self, messages: Sequence[ChatMessage], variables: Mapping[str, Any] | None = None,
                        template: str | None = None, tools: list[dict[str, Any]] | None = None) -> list[int]:
        return list(range(4 * len(messages)))

    def chat_format(self, template: str | None = None) -> ChatFormat:
        return ChatFormat("plain", "no chat template", False, False, False, False)

    def reply_section(self, messages: Sequence[ChatMessage], variables: Mapping[str, Any] | None = None,
                      template: str | None = None, tools: list[dict[str, Any]] | None = None) -> str:
        return CONTENT_PIECE

    def prepare_chat(self, request: ChatRequest) -> PreparedChat:
        """The engine's own fitting (engine.chat.prepare), over this stand-in's tokens and format."""
        return prepare_chat(self, self.n_ctx, request)

    def generate(self, prompt: Sequence[int], params: GenerationParams, stop: threading.Event) -> Generation:
        stats = GenerationStats(mode=params.mode, current_mode="sd", prompt_tokens=len(prompt))
        tokens: list[int] = []
        return Generation(self._run(params, stop, stats, tokens), stats, tokens, threading.Event())

    def _run(self, params: GenerationParams, stop: threading.Event, stats: GenerationStats,
             tokens: list[int]) -> Generator[TokenEvent, None, None]:
        t0 = time.perf_counter()
        stats.ttft_s = 0.0
        for start in range(0, len(self.words), self.per_round):
            if stop.is_set():
                stats.finish_reason = "stopped"
                return
            time.sleep(self.step_s)
            self.rounds += 1
            for word in self.words[start:start + self.per_round]:
                tokens.append(len(tokens))
                stats.new_tokens = len(tokens)
                stats.seconds = time.perf_counter() - t0
                stats.tokens_per_second = stats.new_tokens / stats.seconds
                yield TokenEvent(len(tokens), word, False, self.rounds)
                if len(tokens) >= params.max_tokens:
                    stats.finish_reason = "length"
                    return
        stats.finish_reason = "stop"

    def measured_rates(self) -> dict[str, MeasuredRate]:
        return {}

    def prompt_cache_use(self) -> CacheUse:
        return CacheUse(0, 0, 0, 0, 0)  # this stand-in keeps no prompt states

    def close(self) -> None:
        pass


def stepping_window(qtbot: QtBot, engine: SteppingEngine, settings: Settings | None = None) -> MainWindow:
    """A shown, ready MainWindow whose worker runs ``engine`` (no model file is loaded)."""
    window = open_window(qtbot, None, settings or fast_settings(mode="auto", max_tokens=1000))
    window.host.worker._engine = engine  # type: ignore[assignment]
    window.host.state_changed.emit(EngineState.READY)
    return window
