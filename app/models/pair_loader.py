"""The active model pair: the first-run choice, the model manager, and (re)loading it with the settings."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QDialog, QLabel, QWidget

from app.settings.store import ActivePair, SettingsStore
from app.settings.values import Settings
from app.worker.host import EngineHost
from engine import CacheUse, EngineError, MeasuredRate


class PairLoader(QObject):
    """Knows which pair is active, asks the host to load it, and says so in the model label.

    Signals:
        error(str): a readable problem (settings the engine refuses, a failed first-run setup).
    """

    error = Signal(str)

    def __init__(self, host: EngineHost, store: SettingsStore, settings: Callable[[], Settings],
                 label: QLabel, parent: QWidget) -> None:
        super().__init__(parent)
        self.host = host
        self.store = store
        self.settings = settings
        self.label = label
        self.window = parent
        self.pair: ActivePair | None = None
        self.model_manager: QDialog | None = None
        self._loading = False
        host.model_loaded.connect(self._on_model_loaded)
        host.failed.connect(self._on_failed)
        host.rates_measured.connect(self._on_rates_measured)
        self.cache_use: CacheUse | None = None  # the prompt cache after the last reply (None: no reply yet)
        host.cache_used.connect(self._on_cache_used)

    @property
    def has_draft(self) -> bool:
        """Whether the active pair has a draft (without one only ``ar`` runs)."""
        return self.pair is not None and self.pair.draft is not None

    def measured_rates(self) -> dict[str, MeasuredRate]:
        """auto's last measured rates for the active pair on this machine ({} before auto ran on it)."""
        return self.store.measured_rates(self._key()) if self.pair is not None else {}

    def _key(self) -> str:
        assert self.pair is not None
        return f"{self.pair.target}|{self.pair.draft or ''}"

    def _on_cache_used(self, use: CacheUse) -> None:
        self.cache_use = use

    def _on_rates_measured(self, rates: dict[str, MeasuredRate]) -> None:
        if self.pair is not None and rates:
            self.store.set_measured_rates(self._key(), rates)

    def activate(self, pair: ActivePair) -> None:
        """Remember ``pair`` as the active pair and load it on the worker thread."""
        self.store.set_active_pair(pair)
        self.pair = pair
        self.load()

    def start(self) -> None:
        """First run and later starts: load the last pair, set up the offline pair, or open the manager."""
        from app.startup.first_run import FirstRun

        self.first_run = FirstRun(self.window)
        self.first_run.pair_ready.connect(self.activate)
        self.first_run.manager_needed.connect(self.open_manager)
        self.first_run.failed.connect(self.error)
        self.first_run.start(self.store.active_pair())

    def load(self) -> None:
        """(Re)load the active pair with the current settings (the CPU-kernel choice is read now too)."""
        if self.pair is None:
            return
        try:
            config = self.settings().engine_config(self.pair.target, self.pair.draft)
        except EngineError as exc:
            self.error.emit(str(exc))
            return
        self.label.setText(f"Loading {self.pair.name}…")
        self._loading = True
        self.host.load(config, self.pair.name)

    def open_manager(self) -> None:
        """Show the model manager; picking a pair there loads it."""
        from app.models.manager import ModelManagerDialog

        dialog = ModelManagerDialog(self.window, active=self.pair)
        dialog.pair_activated.connect(self.activate)
        dialog.open()
        self.model_manager = dialog

    def close_manager(self) -> None:
        """Close the model manager if it is open (its download thread is joined)."""
        if self.model_manager is not None:
            self.model_manager.close()

    def _on_model_loaded(self, label: str) -> None:
        self._loading = False
        self.label.setText(f"Model: {label}" + ("" if self.has_draft else " (no draft: ar, lookup or auto)"))

    def _on_failed(self, _message: str) -> None:
        if self._loading or self.pair is None:
            self.label.setText("No model loaded")
        self._loading = False
