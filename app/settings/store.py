"""The only module that touches QSettings: :class:`Settings`, the active model pair, the local server's port
and auto's last measured rates."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QSettings

from app.settings.values import Settings, setting_options
from engine import EngineError, MeasuredRate, user_data_dir

log = logging.getLogger(__name__)

DEFAULT_PORT = 8080


@dataclass(frozen=True, slots=True)
class ActivePair:
    """The model pair the app loads: an id for display and the two file paths (draft optional)."""

    pair_id: str
    name: str
    target: str
    draft: str | None


def settings_path() -> Path:
    """The ini file under the user data folder (so ``SSD_CHAT_DATA_DIR`` isolates tests)."""
    return user_data_dir() / "settings.ini"


class SettingsStore:
    """Typed access to the app's QSettings ini file."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or settings_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._qs = QSettings(str(self.path), QSettings.Format.IniFormat)

    def load(self) -> Settings:
        """The saved settings; unreadable or out-of-bounds values fall back to their defaults."""
        values: dict[str, object] = {}
        for name, option in setting_options().items():
            raw = self._qs.value(f"generation/{name}", None)
            if raw is None:
                continue
            try:
                values[name] = option.parse(str(raw))
            except EngineError as exc:
                log.warning("ignoring an unreadable setting %s=%r: %s", name, raw, exc)
        loaded = Settings(**values)  # type: ignore[arg-type]
        bad = loaded.problems()
        if bad:
            log.warning("ignoring invalid settings: %s", "; ".join(bad.values()))
            loaded = Settings(**{k: v for k, v in values.items() if k not in bad})  # type: ignore[arg-type]
        return loaded

    def save(self, settings: Settings) -> None:
        """Persist ``settings`` (they must be valid)."""
        for name in setting_options():
            self._qs.setValue(f"generation/{name}", getattr(settings, name))
        self._qs.sync()

    def active_pair(self) -> ActivePair | None:
        """The pair chosen last time, or None."""
        target = self._qs.value("models/target", "")
        if not target:
            return None
        draft = self._qs.value("models/draft", "")
        return ActivePair(str(self._qs.value("models/pair_id", "")), str(self._qs.value("models/name", "")),
                          str(target), str(draft) or None)

    def set_active_pair(self, pair: ActivePair | None) -> None:
        """Remember (or forget) the active pair."""
        if pair is None:
            self._qs.remove("models")
        else:
            self._qs.setValue("models/pair_id", pair.pair_id)
            self._qs.setValue("models/name", pair.name)
            self._qs.setValue("models/target", pair.target)
            self._qs.setValue("models/draft", pair.draft or "")
        self._qs.sync()

    def window_state(self) -> tuple[bytes | None, bytes | None]:
        """Saved main-window geometry and splitter state."""
        geo = self._qs.value("window/geometry", None)
        split = self._qs.value("window/splitter", None)
        return (bytes(geo) if geo is not None else None,  # type: ignore[call-overload]
                bytes(split) if split is not None else None)  # type: ignore[call-overload]

    def set_window_state(self, geometry: bytes, splitter: bytes) -> None:
        """Remember the main window's geometry and splitter sizes."""
        self._qs.setValue("window/geometry", geometry)
        self._qs.setValue("window/splitter", splitter)
        self._qs.sync()

    def left_open(self) -> tuple[int | None, bool]:
        """The conversation shown, and whether the local server was on, when the app last closed."""
        try:
            conversation: int | None = int(str(self._qs.value("reopen/conversation", "")))
        except ValueError:
            conversation = None
        return conversation, str(self._qs.value("reopen/serving", "false")).lower() == "true"

    def set_left_open(self, conversation_id: int | None, serving: bool) -> None:
        """Remember what :meth:`left_open` gives back."""
        self._qs.setValue("reopen/conversation", "" if conversation_id is None else conversation_id)
        self._qs.setValue("reopen/serving", serving)
        self._qs.sync()

    def chat_template(self, model_path: str) -> str:
        """The chat template picked for a model file without one ("": none picked; a builtin template's name; or
        ``plain`` for a plain-text conversation)."""
        return str(self._qs.value(f"chat_templates/{_key(model_path)}", ""))

    def set_chat_template(self, model_path: str, choice: str) -> None:
        """Remember the chat template picked for a model file ("" forgets it)."""
        if choice:
            self._qs.setValue(f"chat_templates/{_key(model_path)}", choice)
        else:
            self._qs.remove(f"chat_templates/{_key(model_path)}")
        self._qs.sync()

    def server_port(self) -> int:
        """The local server's port (:data:`DEFAULT_PORT` until the user picks another)."""
        try:
            port = int(str(self._qs.value("server/port", DEFAULT_PORT)))
        except ValueError:
            return DEFAULT_PORT
        return port if 1 <= port <= 65535 else DEFAULT_PORT

    def set_server_port(self, port: int) -> None:
        """Remember the local server's port."""
        self._qs.setValue("server/port", port)
        self._qs.sync()

    def measured_rates(self, pair: str) -> dict[str, MeasuredRate]:
        """auto's last measured rates for ``pair`` (a key naming its files) on this machine, or {}."""
        if self._qs.value("measured/pair", "") != pair:
            return {}
        try:
            raw = json.loads(str(self._qs.value("measured/rates", "{}")))
            return {mode: MeasuredRate(mode, str(plan), float(rate)) for mode, (plan, rate) in raw.items()}
        except (ValueError, TypeError, AttributeError):
            return {}

    def set_measured_rates(self, pair: str, rates: Mapping[str, MeasuredRate]) -> None:
        """Remember auto's measured rates for ``pair`` (only the latest pair's are kept)."""
        self._qs.setValue("measured/pair", pair)
        self._qs.setValue("measured/rates", json.dumps({m: [r.plan, r.tokens_per_second] for m, r in rates.items()}))
        self._qs.sync()


def _key(model_path: str) -> str:
    """A settings key for a model file (a path's slashes would nest groups in the ini file)."""
    return hashlib.sha256(str(Path(model_path).resolve()).encode("utf-8")).hexdigest()[:32]
