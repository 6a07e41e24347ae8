"""Where ssd-chat keeps its data: the model store, the history database, bundled resources."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import platformdirs

APP_NAME = "ssd-chat"


def user_data_dir() -> Path:
    """The per-user data folder; ``SSD_CHAT_DATA_DIR`` overrides it (tests, portable installs)."""
    override = os.environ.get("SSD_CHAT_DATA_DIR")
    if override:
        return Path(override)
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def model_store_dir() -> Path:
    """Folder holding downloaded, assembled and converted GGUF files."""
    return user_data_dir() / "models"


def resources_dir() -> Path:
    """The ``resources/`` folder, from a source checkout, an installed wheel or a frozen build."""
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        return Path(frozen) / "resources"
    here = Path(__file__).resolve().parents[2] / "resources"
    if here.is_dir():
        return here
    import ssd_chat_resources  # type: ignore[import-not-found]  # pyproject's package-dir mapping

    return Path(ssd_chat_resources.__file__).resolve().parent
