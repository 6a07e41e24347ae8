"""The suite keeps to temporary folders: tests of every kind, run with HOME pointed at an empty folder, leave it empty.

(.ci/run checks the same for the whole suite.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from engine.core import cpu_check
from engine.speculative.memory import DIR_ENV as MEMORY_ENV
from tests.conftest import DATA_ENV, OTHER_PROGRAMS_ENV

# One test of each kind that writes: the app window (settings, history, model load, the CPU check, planner memory),
# QSettings, a download from a stand-in Hub (huggingface_hub) and the CLI in a subprocess.
REPRESENTATIVE = [
    "tests/test_app_window.py::test_chat_streams_saves_stats_and_survives_restart",
    "tests/test_app_settings.py::test_store_round_trip_and_bad_values_fall_back",
    "tests/test_models_hub.py::test_pair_downloads_as_one_unit_with_progress",
    "tests/test_cli.py::test_truncated_gguf_in_subprocess_is_not_a_crash",
]


def test_tests_leave_an_empty_home_empty(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    ours = {DATA_ENV, cpu_check.CACHE_ENV, MEMORY_ENV, *OTHER_PROGRAMS_ENV}  # what this run's conftest set
    env = {k: v for k, v in os.environ.items() if k not in ours} | {"HOME": str(home)}
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
                           str(tmp_path / "base"), *REPRESENTATIVE], cwd=root, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"{len(REPRESENTATIVE)} passed" in done.stdout
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []
