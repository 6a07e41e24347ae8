"""The settings dialog: decoding, sampling, hardware and remote-machine settings built from the engine's declarations.

Each field's label, help, bounds and special values come from ``engine.OPTIONS``; a typed value is
checked by the same declaration the engine validates with, and a problem is shown under its field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QFrame,
    QGroupBox,
    QLabel,
    QLineEdit,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.settings.cpu_kernels import LABEL as CPU_LABEL
from app.settings.cpu_kernels import CpuKernelsBox
from app.settings.explain import (
    FIELD_LINES,
    LAYERS_HELP,
    LAYERS_NOTE,
    MODE_SHORT,
    PLAN_LINE,
    cache_words,
    layers_text,
    parse_layers,
    reload_note,
)
from app.settings.mode_note import mode_note
from app.settings.remote import LINE as REMOTE_LINE
from app.settings.remote import RemoteTest
from app.settings.values import Settings, load_fields, setting_options
from engine import CacheUse, EngineError, MeasuredRate, Mode, Option, model_archs, supports_gpu_offload

ERROR_STYLE = "color: #cf222e;"
NOTE_STYLE = "color: #6e7781;"
WARN_STYLE = "color: #9a6700;"
GROUPS = {"decoding": "Decoding", "sampling": "Sampling", "hardware": "Hardware", "remote": "Remote machines"}
ROW_LABELS = {"rpc": "Machines"}  # a field's label where its section already names it
GPU_FIELDS = ("gpu_layers", "draft_gpu_layers")
FIT_FIELDS = ("max_tokens", "n_ctx")  # a reply must fit the context (Settings.problems)
MODE_LINES = {  # one line per mode in the mode list, for someone who has not read about speculation
    "ar": "plain decoding: the target model alone, one token at a time",
    "sd": "speculative: the draft model guesses K tokens, the target checks them in one pass",
    "ssd": "sd that drafts the next round while the target checks this one (pays with spare cores or a GPU)",
    "lookup": "drafts from text already in the chat; no draft model needed",
    "auto": "measures the modes on this machine as it goes and runs the fastest",
}
THINKING_LABELS = {"default": "model default", "on": "on", "off": "off"}
NO_THINKING_SWITCH = ("The loaded model's chat template has no thinking switch: it thinks (or not) as it was made"
                      " to, whatever this says.")
COMBO_POPUP_PAD_PX = 32  # the popup's frame and scroll bar beside the widest item
MIN_WIDTH_PX = 700  # room for a mode line and the longest field label beside its box
SCREEN_SHARE = 0.9  # the dialog's largest height, as a share of the screen's; the rest scrolls


class SettingsDialog(QDialog):
    """Edits a :class:`Settings`; OK stays disabled while any field is invalid, and says why inline."""

    def __init__(self, settings: Settings, parent: QWidget | None = None, *,
                 gpu_offload: bool | None = None, cpu_kernels: CpuKernelsBox | None = None,
                 rates: Mapping[str, MeasuredRate] | None = None, thinking_switch: bool | None = None,
                 cache: CacheUse | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setObjectName("settings-dialog")
        self.setMinimumWidth(MIN_WIDTH_PX)
        self._initial = settings
        self._edited = ""  # of FIT_FIELDS, the one typed in last
        self._gpu = supports_gpu_offload() if gpu_offload is None else gpu_offload
        self.edits: dict[str, QLineEdit] = {}
        self.errors: dict[str, QLabel] = {}
        self.choices: dict[str, QComboBox] = {}
        self.checks: dict[str, QCheckBox] = {}
        forms = {group: QFormLayout() for group in GROUPS}
        for name, option in setting_options().items():
            if option.group in forms:
                self._add_field(forms[option.group], option, getattr(settings, name))
        self.mode = self.choices["mode"]
        self.rates = rates or {}
        self.mode_line = _note("mode-line", NOTE_STYLE)  # the chosen mode in one line (the list shows it short)
        self.mode_note = _note("mode-note", WARN_STYLE)  # auto's measurements against a much slower fixed mode
        row, _ = cast(tuple[int, Any], forms["decoding"].getWidgetPosition(self.mode))
        forms["decoding"].insertRow(row + 1, "", self.mode_line)
        forms["decoding"].insertRow(row + 2, "", self.mode_note)
        self.thinking_note = _note("thinking-note", NOTE_STYLE, NO_THINKING_SWITCH)  # greyed out: the model can't
        self.choices["thinking"].setEnabled(thinking_switch is not False)  # None: no model loaded, nothing known
        self.thinking_note.setVisible(thinking_switch is False)
        forms["decoding"].addRow("", self.thinking_note)
        forms["decoding"].addRow("", _note("arch-note", NOTE_STYLE, model_archs.SPECULATION_NOTE))  # recurrent models
        self.gpu_note = QLabel("This build of llama.cpp has no GPU offload:\n"
                               "everything runs on the CPU and GPU layers are ignored.")
        self.gpu_note.setStyleSheet(NOTE_STYLE)
        self.gpu_note.setVisible(not self._gpu)
        forms["hardware"].addRow(self.gpu_note)
        for name in GPU_FIELDS:
            self.edits[name].setEnabled(self._gpu)
        self.cache_note = _note("cache-note", NOTE_STYLE, cache_words(cache))  # what the prompt cache holds now
        self.cache_note.setVisible(bool(self.cache_note.text()))
        row, _ = cast(tuple[int, Any], forms["hardware"].getWidgetPosition(self.edits["prompt_cache_mb"]))
        forms["hardware"].insertRow(row + 1, "", self.cache_note)
        self.remote_test = RemoteTest(self.edits["rpc"])  # Remote machines: Test asks each one
        forms["remote"].addRow("", self.remote_test)
        forms["remote"].addRow(_note("rpc-line", NOTE_STYLE, REMOTE_LINE))
        self.cpu_kernels = cpu_kernels or CpuKernelsBox()
        self.cpu_kernels.combo.currentIndexChanged.connect(self._on_changed)
        forms["hardware"].addRow(self.cpu_kernels)

        page = QWidget()
        boxes = QVBoxLayout(page)
        for group, title in GROUPS.items():
            box = QGroupBox(title)
            forms[group].setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
            box.setLayout(forms[group])
            boxes.addWidget(box)
        boxes.addStretch(1)
        self.page_area = QScrollArea()  # every note stays readable on a short screen: the page scrolls
        self.page_area.setWidgetResizable(True)
        self.page_area.setFrameShape(QFrame.Shape.NoFrame)
        self.page_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.page_area.setWidget(page)
        layout = QVBoxLayout(self)
        layout.addWidget(self.page_area, 1)
        self.reload_note = _note("reload-note", WARN_STYLE)  # before OK: a change read only when the model loads
        layout.addWidget(self.reload_note)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
            | QDialogButtonBox.StandardButton.RestoreDefaults)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        restore = self.buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults)
        restore.clicked.connect(self._on_restore_clicked)
        layout.addWidget(self.buttons)
        self._on_changed()
        self._fit_screen(page, layout)

    def _fit_screen(self, page: QWidget, layout: QVBoxLayout) -> None:
        """As tall as the page needs, up to :data:`SCREEN_SHARE` of the screen (the rest scrolls)."""
        screen = self.screen().availableGeometry() if self.screen() is not None else None
        bar = self.page_area.verticalScrollBar().sizeHint().width()
        width = max(self.minimumWidth(), page.sizeHint().width() + bar)
        need = page.heightForWidth(width) if page.hasHeightForWidth() else page.sizeHint().height()
        margins = layout.contentsMargins()
        need += self.buttons.sizeHint().height() + 4 * layout.spacing() + margins.top() + margins.bottom()
        most = int(SCREEN_SHARE * screen.height()) if screen is not None else need
        self.resize(width, min(need, most))

    def _add_field(self, form: QFormLayout, option: Option[Any], value: object) -> None:
        tip = f"{option.help} ({option.bounds_text()})" if option.minimum is not None else option.help
        if option.choices:
            combo = QComboBox()
            for choice in option.choices:
                short = MODE_SHORT.get(str(choice)) if option.name == "mode" else None
                shown = THINKING_LABELS.get(str(choice), str(choice)) if option.name == "thinking" else str(choice)
                combo.addItem(f"{choice} — {short}" if short else shown, choice)
                if short:
                    combo.setItemData(combo.count() - 1, MODE_LINES[str(choice)], Qt.ItemDataRole.ToolTipRole)
            combo.setCurrentIndex(option.choices.index(value))
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)  # each item shows whole
            combo.view().setMinimumWidth(combo.view().sizeHintForColumn(0) + COMBO_POPUP_PAD_PX)
            combo.setToolTip(tip)
            combo.currentIndexChanged.connect(self._on_changed)
            self.choices[option.name] = combo
            form.addRow(option.label, combo)
            return
        if option.kind is bool:
            check = QCheckBox(option.label)
            check.setChecked(bool(value))
            check.setToolTip(tip)
            self.checks[option.name] = check
            form.addRow("", check)
            if option.name in FIELD_LINES:
                form.addRow("", _note(f"{option.name}-line", NOTE_STYLE, FIELD_LINES[option.name]))
            return
        layers = option.name in GPU_FIELDS  # auto, all, none or a number, as on the command line
        edit = QLineEdit(layers_text(cast(int, value)) if layers else _fmt(value))
        edit.setObjectName(option.name)
        edit.setToolTip(LAYERS_HELP if layers else tip)
        edit.textChanged.connect(lambda _text, name=option.name: self._on_edited(name))
        error = QLabel()
        error.setStyleSheet(ERROR_STYLE)
        error.setWordWrap(True)
        error.hide()
        box = QVBoxLayout()
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addWidget(edit)
        box.addWidget(error)
        if option.name in FIELD_LINES:
            box.addWidget(_note(f"{option.name}-line", NOTE_STYLE, FIELD_LINES[option.name]))
        holder = QWidget()
        holder.setLayout(box)
        note = LAYERS_NOTE if layers else option.note
        label = ROW_LABELS.get(option.name, option.label)
        form.addRow(f"{label} ({note})" if note else label, holder)
        self.edits[option.name] = edit
        self.errors[option.name] = error

    def values(self) -> tuple[Settings | None, dict[str, str]]:
        """The settings as typed, or None, and a field→reason map of problems."""
        problems: dict[str, str] = {}
        values: dict[str, object] = {"tint_drafts": self._initial.tint_drafts}
        values.update({name: combo.currentData() for name, combo in self.choices.items()})
        values.update({name: check.isChecked() for name, check in self.checks.items()})
        options = setting_options()
        for name, edit in self.edits.items():
            try:
                values[name] = self._parse(name, edit.text())
            except EngineError as exc:
                problems[name] = str(exc)
        if problems:
            return None, problems
        settings = Settings(**values)  # type: ignore[arg-type]
        problems = settings.problems()
        if self._edited == "n_ctx" and "max_tokens" in problems and "n_ctx" not in problems \
                and options["max_tokens"].problem(settings.max_tokens) is None:  # the rule across the two
            problems["n_ctx"] = (f"{options['n_ctx'].noun} must be at least {options['max_tokens'].noun}"
                                 f" ({settings.max_tokens}), got {settings.n_ctx}")
            del problems["max_tokens"]
        return (None if problems else settings), problems

    def _parse(self, name: str, text: str) -> object:
        option = setting_options()[name]
        return parse_layers(text, option.noun) if name in GPU_FIELDS else option.parse(text)

    def _on_edited(self, name: str) -> None:
        if name in FIT_FIELDS:  # the rule across them shows under the one of the two changed last
            self._edited = name
        self._on_changed()

    def _reloads(self) -> list[str]:
        """The labels of changed settings read when the model loads (the CPU kernels' choice too)."""
        options = setting_options()
        changed = []
        for name in load_fields():
            try:
                if name in self.edits and self._parse(name, self.edits[name].text()) != getattr(self._initial, name):
                    changed.append(options[name].label)
            except EngineError:
                continue
        if self.cpu_kernels.choice() != self.cpu_kernels.status.override:
            changed.append(CPU_LABEL)
        return changed

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
        self.mode_line.setText(MODE_LINES[mode])
        note = mode_note(mode, self.rates)
        self.mode_note.setText(f"{note} {PLAN_LINE}" if "M=" in note else note)
        self.mode_note.setVisible(bool(note))
        self.reload_note.setText(reload_note(self._reloads()))
        self.reload_note.setVisible(bool(self.reload_note.text()))
        kind = Mode(mode)
        self.edits["k"].setEnabled(kind is not Mode.AR)
        self.edits["fanout"].setEnabled(kind.has_tree)
        self.checks["geometric"].setEnabled(kind.has_tree)
        self.checks["adaptive"].setEnabled(kind is Mode.AUTO)

    def _on_restore_clicked(self) -> None:
        defaults = Settings(tint_drafts=self._initial.tint_drafts)
        for name, combo in self.choices.items():
            combo.setCurrentIndex(combo.findData(getattr(defaults, name)))
        for name, check in self.checks.items():
            check.setChecked(getattr(defaults, name))
        for name, edit in self.edits.items():
            value = getattr(defaults, name)
            edit.setText(layers_text(value) if name in GPU_FIELDS else _fmt(value))
        self.cpu_kernels.set_choice("auto")


def _fmt(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _note(name: str, style: str, text: str = "") -> QLabel:
    """A wrapped line of small print under a field."""
    label = QLabel(text)
    label.setObjectName(name)
    label.setWordWrap(True)
    label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)  # under its field, not mid-row
    label.setStyleSheet(style)
    return label
