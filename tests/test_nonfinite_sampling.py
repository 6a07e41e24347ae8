"""NaN and infinite sampling numbers are refused by the command line and the app's settings, through the one
declaration the server checks too (``engine.OPTIONS``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.settings.store import SettingsStore
from app.settings.values import Settings
from tests.tiny_models import TinyPair

NUMBERS = [("--temperature", "nan"), ("--temperature", "inf"), ("--top-p", "nan"), ("--min-p", "-inf")]


@pytest.mark.parametrize(("flag", "value"), NUMBERS)
def test_generate_refuses_a_number_that_is_not_finite(tiny: TinyPair, flag: str, value: str) -> None:
    argv = [sys.executable, "-m", "engine", "generate", "--target", str(tiny.target), "--mode", "ar", "--prompt",
            "hi", "--max-tokens", "2", "--threads", "1", f"{flag}={value}"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    lines = [line for line in r.stderr.splitlines() if not line.startswith("[")]  # "[CPU build ...]" notes
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and "finite" in lines[0], r.stderr


@pytest.mark.parametrize("name", ["temperature", "top_p", "min_p"])
def test_settings_refuse_nan_and_a_saved_nan_falls_back(data_dir: Path, name: str) -> None:
    assert "finite" in Settings().with_values(**{name: float("nan")}).problems()[name]
    store = SettingsStore()
    store.save(Settings())
    text = store.path.read_text()
    assert f"{name}=" in text
    store.path.write_text("\n".join(f"{name}=nan" if line.startswith(f"{name}=") else line
                                    for line in text.splitlines()) + "\n")
    loaded = SettingsStore().load()
    assert getattr(loaded, name) == getattr(Settings(), name) and not loaded.problems()
