"""EngineHost: owns the engine thread, posts requests to its worker, and re-emits its signals on the UI thread.

The worker drives the engine process; closing the host ends that process (and it ends itself if the app dies).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from PySide6.QtCore import QObject, QThread, Signal

from app.server.slot import ServerRequest
from app.worker.chat_setup import ChatChoice, Turn
from app.worker.engine_worker import EngineSignals, EngineWorker, LoadRequest
from engine import DROP_OLDEST, EngineConfig, GenerationParams

log = logging.getLogger(__name__)


class EngineHost(EngineSignals):
    """The UI thread's handle on an :class:`EngineWorker` running on its own QThread.

    It has the worker's signals (both inherit :class:`EngineSignals`) and forwards each one with a
    queued signal-to-signal connection, so whatever connects to the host runs on the UI thread.

    Signals:
        load_requested(LoadRequest), generate_requested(GenerateRequest),
        verify_requested(GenerateRequest), unload_requested(), server_start_requested(ServerRequest),
        server_stop_requested(), restart_requested(), format_requested(str): queued to the worker's slots.
        The rest: as on :class:`EngineSignals`.
    """

    load_requested = Signal(object)
    generate_requested = Signal(object)
    verify_requested = Signal(object)
    unload_requested = Signal()
    server_start_requested = Signal(object)
    server_stop_requested = Signal()
    restart_requested = Signal()
    format_requested = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine_thread = QThread()
        self.engine_thread.setObjectName("engine")
        self.worker = EngineWorker()
        self.worker.moveToThread(self.engine_thread)
        self.load_requested.connect(self.worker.load)
        self.generate_requested.connect(self.worker.generate)
        self.verify_requested.connect(self.worker.verify)
        self.unload_requested.connect(self.worker.unload)
        self.server_start_requested.connect(self.worker.start_server)
        self.server_stop_requested.connect(self.worker.stop_server)
        self.restart_requested.connect(self.worker.restart)
        self.format_requested.connect(self.worker.read_format)
        for name in EngineSignals.signal_names():
            getattr(self.worker, name).connect(getattr(self, name))
        self.engine_thread.start()
        self._shut = False

    def load(self, config: EngineConfig, label: str) -> None:
        """Ask the worker to load a pair."""
        self.load_requested.emit(LoadRequest(config, label))

    def generate(self, messages: Sequence[Turn], params: GenerationParams, overflow: str = DROP_OLDEST,
                 chat: ChatChoice | None = None) -> int:
        """Ask for a reply (``overflow``: what a chat longer than the context does; ``chat``: the thinking switch and
        a template picked for the model); returns the request id."""
        req = self.worker.new_request(messages, params, overflow, chat)
        self.generate_requested.emit(req)
        return req.request_id

    def verify(self, messages: Sequence[Turn], params: GenerationParams) -> int:
        """Ask for an exactness check of ``params.mode`` against ``ar``."""
        req = self.worker.new_request(messages, params)
        self.verify_requested.emit(req)
        return req.request_id

    def start_server(self, request: ServerRequest) -> None:
        """Ask the worker to serve the loaded pair (the answer comes as ``server_changed``)."""
        self.server_start_requested.emit(request)

    def stop_server(self) -> None:
        """Ask the worker to stop the local server."""
        self.server_stop_requested.emit()

    def restart_engine(self) -> None:
        """Ask the worker to start the engine process again with the same pair (after it stopped)."""
        self.restart_requested.emit()

    def read_format(self, template: str = "") -> None:
        """Ask for the loaded model's chat format with ``template`` (the answer comes as ``format_read``)."""
        self.format_requested.emit(template)

    def request_stop(self) -> None:
        """Stop the running generation within one round."""
        self.worker.request_stop()

    def shutdown(self, timeout_ms: int = 30000) -> None:
        """Stop any generation, end the thread and free the engine (idempotent)."""
        if self._shut:
            return
        self._shut = True
        self.worker.request_stop()
        self.engine_thread.quit()
        if not self.engine_thread.wait(timeout_ms):
            log.error("the engine thread did not stop within %d ms", timeout_ms)
            return
        self.worker.close_engine()
