"""A model with no chat template (a base model): say so in plain words and offer what it can do, a plain-text
conversation or a chat template picked for it, remembered per model file; never a silent fallback."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QComboBox, QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.settings.store import ActivePair, SettingsStore
from app.settings.values import Settings
from app.worker.chat_setup import BUILTIN_TEMPLATES, PLAIN_TEXT, ChatChoice, ModelFormat
from app.worker.host import EngineHost

NO_TEMPLATE = ("This model has no chat template, so it cannot chat as it is: it is most likely a base model, made"
               " to continue text. Talk to it in plain text (it continues what you write), or pick a chat template"
               " for it (the suggested one fits its vocabulary). The choice is kept for this model file.")
TEMPLATE_LABELS = {"chatml": "ChatML (Qwen, Yi, many fine-tunes)", "llama3": "Llama 3", "gemma": "Gemma",
                   "mistral": "Mistral [INST]", "phi3": "Phi-3"}
OFFER_STYLE = "QFrame#template-offer { background:#fff8c5; border:1px solid #d4a72c; border-radius:4px; }"


class TemplateOffer(QFrame):
    """The offer above the conversation: the plain words, "Plain text", and a template list with "Use it".

    Signals:
        plain_chosen(): the user chose a plain-text conversation.
        template_chosen(str): the user picked a builtin template (its name).
    """

    plain_chosen = Signal()
    template_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("template-offer")
        self.setStyleSheet(OFFER_STYLE)
        self.label = QLabel(NO_TEMPLATE)
        self.label.setWordWrap(True)
        self.plain_button = QPushButton("Plain text")
        self.plain_button.setToolTip("Send the conversation as one text for the model to continue")
        self.plain_button.clicked.connect(self.plain_chosen)
        self.combo = QComboBox()
        for name in BUILTIN_TEMPLATES:
            self.combo.addItem(TEMPLATE_LABELS.get(name, name), name)
        self.use_button = QPushButton("Use this chat template")
        self.use_button.clicked.connect(lambda: self.template_chosen.emit(str(self.combo.currentData())))
        row = QHBoxLayout()
        row.addWidget(self.plain_button)
        row.addStretch(1)
        row.addWidget(self.combo)
        row.addWidget(self.use_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.label)
        layout.addLayout(row)
        self.hide()

    def offer(self, suggested: str | None) -> None:
        """Show the offer, the suggested template chosen in the list (and named as suggested)."""
        for i in range(self.combo.count()):
            name = str(self.combo.itemData(i))
            label = TEMPLATE_LABELS.get(name, name)
            self.combo.setItemText(i, f"{label} (suggested)" if name == suggested else label)
            if name == suggested:
                self.combo.setCurrentIndex(i)
        self.show()


class ChatFormats(QObject):
    """The loaded model's chat format as the app uses it: read when a model loads, the offer shown for a model
    without a template, the user's pick remembered per model file, and the choice each reply is sent with.

    Signals:
        chosen(): a template or plain text was picked (a message left unanswered for want of one can be answered).
    """

    chosen = Signal()

    def __init__(self, host: EngineHost, store: SettingsStore, pair: Callable[[], ActivePair | None],
                 settings: Callable[[], Settings], offer: TemplateOffer, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host, self.store, self.pair, self.settings, self.offer = host, store, pair, settings, offer
        self.format: ModelFormat | None = None
        host.model_loaded.connect(self._on_model_loaded)
        host.format_read.connect(self._on_format_read)
        offer.plain_chosen.connect(lambda: self.pick(PLAIN_TEXT))
        offer.template_chosen.connect(self.pick)

    def _model(self) -> str:
        pair = self.pair()
        return pair.target if pair is not None else ""

    def template(self) -> str:
        """The template picked for the loaded model ("": its own; ``plain``: plain text)."""
        model = self._model()
        return self.store.chat_template(model) if model else ""

    def choice(self) -> ChatChoice:
        """How the next reply is asked for: the Settings' thinking switch and the model's picked template."""
        return ChatChoice(self.settings().thinking, self.template())

    def thinking_switch(self) -> bool | None:
        """Whether the loaded model's template can switch thinking (None: not known yet)."""
        return self.format.thinking_switch if self.format is not None else None

    def pick(self, template: str) -> None:
        """Remember ``template`` (a builtin name or ``plain``) for the loaded model, and use it from now on."""
        model = self._model()
        if not model:
            return
        self.store.set_chat_template(model, template)
        self.offer.hide()
        self.host.read_format(template)
        self.chosen.emit()

    def _on_model_loaded(self, _label: str) -> None:
        self.format = None
        self.offer.hide()
        self.host.read_format(self.template())

    def _on_format_read(self, fmt: ModelFormat) -> None:
        self.format = fmt
        if not fmt.has_template and fmt.template != PLAIN_TEXT:
            self.offer.offer(fmt.suggested)
        else:
            self.offer.hide()
