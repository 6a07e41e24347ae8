"""The settings dialog: decoding, sampling and hardware settings with inline validation."""

from __future__ import annotations

from dataclasses import fields

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from engine import backend
from engine.engine import cpu_cores

from .settings import MODES, Settings, auto_available

ERROR_STYLE = "color: #cf222e;"

MODE_TEXT = {
    "auto": "auto: pick the fastest mode as it goes",
    "ar": "ar: plain autoregressive (target only)",
    "sd": "sd: speculative decoding",
    "ssd": "ssd: speculative speculative decoding",
}

LABELS = {
    "k": "Draft length K",
    "fanout": "Pre-speculation window (fan-out)",
    "temperature": "Temperature",
    "top_p": "Top-p",
    "seed": "Seed",
    "max_tokens": "Reply length (tokens)",
    "n_ctx": "Context length (tokens)",
    "threads": "CPU threads, target",
    "draft_threads": "CPU threads, draft",
    "gpu_layers": "GPU layers, target",
    "draft_gpu_layers": "GPU layers, draft",
}

NUMBER_FIELDS = ("k", "fanout", "temperature", "top_p", "seed", "max_tokens", "n_ctx", "threads",
                 "draft_threads", "gpu_layers", "draft_gpu_layers")


class SettingsDialog(QDialog):
    """Edits a :class:`Settings`; OK stays disabled while any field is invalid, and says why inline."""

    def __init__(self, settings: Settings, parent: QWidget | None = None, *,
                 gpu_offload: bool | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setObjectName("settings-dialog")
        self.setMinimumWidth(560)
        self._initial = settings
        self._gpu = backend.supports_gpu_offload() if gpu_offload is None else gpu_offload
        self.edits: dict[str, QLineEdit] = {}
        self.errors: dict[str, QLabel] = {}
        self.mode = QComboBox()
        for m in MODES:
            self.mode.addItem(MODE_TEXT[m], m)
        self.mode.setCurrentIndex(MODES.index(settings.mode))
        self.adaptive = QCheckBox("Adaptive draft length (auto mode)")
        self.adaptive.setChecked(settings.adaptive)
        self.geometric = QCheckBox("Geometric allocation of the fan-out")
        self.geometric.setChecked(settings.geometric)

        decoding = QFormLayout()
        decoding.addRow("Mode", self.mode)
        if not auto_available():
            note = QLabel("This engine build runs auto as ssd for now.")
            note.setStyleSheet("color: #6e7781;")
            decoding.addRow("", note)
        self._add_number(decoding, "k", settings)
        decoding.addRow("", self.adaptive)
        self._add_number(decoding, "fanout", settings)
        decoding.addRow("", self.geometric)
        sampling = QFormLayout()
        for name in ("temperature", "top_p", "seed", "max_tokens"):
            self._add_number(sampling, name, settings)
        hardware = QFormLayout()
        for name in ("n_ctx", "threads", "draft_threads", "gpu_layers", "draft_gpu_layers"):
            self._add_number(hardware, name, settings)
        self.gpu_note = QLabel(
            "Layers offloaded to the GPU: -1 = all, 0 = none." if self._gpu else
            "This build of llama.cpp has no GPU offload:\n"
            "everything runs on the CPU and GPU layers are ignored.")
        self.gpu_note.setStyleSheet("color: #6e7781;")
        hardware.addRow(QLabel(f"Threads: 0 = all {cpu_cores()} cores."))
        hardware.addRow(self.gpu_note)
        if not self._gpu:
            self.edits["gpu_layers"].setEnabled(False)
            self.edits["draft_gpu_layers"].setEnabled(False)

        layout = QVBoxLayout(self)
        for title, form in (("Decoding", decoding), ("Sampling", sampling), ("Hardware", hardware)):
            box = QGroupBox(title)
            box.setLayout(form)
            layout.addWidget(box)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
            | QDialogButtonBox.StandardButton.RestoreDefaults)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        restore = self.buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults)
        restore.clicked.connect(self._on_restore_clicked)
        layout.addWidget(self.buttons)
        self.mode.currentIndexChanged.connect(self._on_changed)
        self._on_changed()

    def _add_number(self, form: QFormLayout, name: str, settings: Settings) -> None:
        edit = QLineEdit(_fmt(getattr(settings, name)))
        edit.setObjectName(name)
        edit.textChanged.connect(self._on_changed)
        error = QLabel()
        error.setStyleSheet(ERROR_STYLE)
        error.setWordWrap(True)
        error.hide()
        box = QVBoxLayout()
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addWidget(edit)
        box.addWidget(error)
        holder = QWidget()
        holder.setLayout(box)
        form.addRow(LABELS[name], holder)
        self.edits[name] = edit
        self.errors[name] = error

    def values(self) -> tuple[Settings | None, dict[str, str]]:
        """The settings as typed, or None, and a field→reason map of problems."""
        problems: dict[str, str] = {}
        values: dict[str, object] = {"mode": self.mode.currentData(), "adaptive": self.adaptive.isChecked(),
                                     "geometric": self.geometric.isChecked(),
                                     "tint_drafts": self._initial.tint_drafts}
        kinds = {f.name: type(getattr(self._initial, f.name)) for f in fields(Settings)}
        for name, edit in self.edits.items():
            text = edit.text().strip()
            try:
                values[name] = kinds[name](text)
            except ValueError:
                problems[name] = "enter a whole number" if kinds[name] is int else "enter a number"
        if problems:
            return None, problems
        settings = Settings(**values)  # type: ignore[arg-type]
        problems = settings.problems()
        return (None if problems else settings), problems

    def settings(self) -> Settings:
        """The accepted settings (only valid after ``exec()`` returned Accepted)."""
        settings, _ = self.values()
        return settings or self._initial

    def _on_changed(self) -> None:
        _, problems = self.values()
        for name, label in self.errors.items():
            label.setText(problems.get(name, ""))
            label.setVisible(name in problems)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(not problems)
        mode = self.mode.currentData()
        self.edits["k"].setEnabled(mode != "ar")
        self.edits["fanout"].setEnabled(mode in ("ssd", "auto"))
        self.geometric.setEnabled(mode in ("ssd", "auto"))
        self.adaptive.setEnabled(mode == "auto")

    def _on_restore_clicked(self) -> None:
        defaults = Settings(tint_drafts=self._initial.tint_drafts)
        self.mode.setCurrentIndex(MODES.index(defaults.mode))
        self.adaptive.setChecked(defaults.adaptive)
        self.geometric.setChecked(defaults.geometric)
        for name, edit in self.edits.items():
            edit.setText(_fmt(getattr(defaults, name)))


def _fmt(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
