"""Shared fixtures: tiny generated models (once per session) and the real offline pair (opt-in)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from engine import offline
from tests.tiny_models import TinyPair, make_pair


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` (soaks, minutes) run only when asked: ``-m slow`` or ``SSD_CHAT_SLOW_TESTS=1``
    (installer tests have their own opt-in, ``SSD_CHAT_INSTALLER_TESTS=1``)."""
    if os.environ.get("SSD_CHAT_SLOW_TESTS") == "1" or "slow" in str(config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or SSD_CHAT_SLOW_TESTS=1")
    for item in items:
        if "slow" in item.keywords and "installer" not in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _auto_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """auto's measurements kept by engines that remember the machine (the app's, the CLI's in subprocesses too)
    go to a folder of this test session, not the user's cache."""
    from engine.speculative.memory import DIR_ENV

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DIR_ENV, str(tmp_path_factory.mktemp("auto-memory")))
        yield


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyPair:
    """A tiny target with an identical, a related and an unrelated draft, plus a 16-token pair."""
    return make_pair(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def real_pair() -> offline.OfflinePair:
    """The real Qwen2.5-Coder 1.5B/0.5B pair, assembled in the model store (offline-models extra)."""
    pair = offline.installed_pair()
    if pair is None:
        if not offline.extra_installed():
            pytest.skip("the offline-models extra is not installed")
        pair = offline.ensure_pair()
    return pair


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private user-data folder for the test (history, settings, model store)."""
    d = tmp_path / "userdata"
    monkeypatch.setenv("SSD_CHAT_DATA_DIR", str(d))
    yield d
