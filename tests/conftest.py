"""Shared fixtures: every test's own folders, tiny generated models (once per session) and the real offline pair
(opt-in, assembled once and shared).

No test reads or writes the user's folders. The run gets one temporary folder (removed when it ends) for what other
programs keep under HOME (Qt's and fontconfig's files, huggingface_hub's cache: the XDG_* and HF_HOME variables) and
for the defaults that session- and module-scoped fixtures see. Each test then gets its own data folder (settings.ini,
history, model store, the CPU-kernel choice), cache folder (the CPU check's verdict) and planner memory
(:func:`_own_folders`). The CPU check probes the host once per run; each test's cache starts with a copy of that
verdict, so loading a model never probes again, and a test whose outcome depends on the verdict sets its own
(:func:`cpu_verdict`). ``SSD_CHAT_CPU_CHECK_FAULT=SIGSEGV:AMX python -m pytest`` runs the suite as on a host whose
AMX unit faults.
"""

from __future__ import annotations

import datetime
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import pytest
from filelock import FileLock

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
DATA_ENV = "SSD_CHAT_DATA_DIR"
# Where other programs keep their own files under HOME; set before huggingface_hub (imported by the engine) reads them.
OTHER_PROGRAMS_ENV = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "HF_HOME")
RUN_PREFIX = "ssd-chat-tests-"  # then the run's process id: a run killed before its end is cleaned by the next one


def _remove_folders_of_ended_runs() -> None:
    for folder in Path(tempfile.gettempdir()).glob(f"{RUN_PREFIX}*-*"):
        pid = folder.name[len(RUN_PREFIX):].split("-")[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:  # alive, another user's
            continue


_remove_folders_of_ended_runs()
RUN_DIR = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-"))
for _name in OTHER_PROGRAMS_ENV:
    os.environ[_name] = str(RUN_DIR / _name.lower())

from engine import offline  # noqa: E402
from engine.core import cpu_check  # noqa: E402
from engine.speculative.memory import DIR_ENV as MEMORY_ENV  # noqa: E402
from tests import cores  # noqa: E402
from tests.sdist import llama_src  # noqa: E402, F401 - the sdist's llama.cpp, a session fixture
from tests.tiny_models import TinyPair, make_pair  # noqa: E402

os.environ[DATA_ENV] = str(RUN_DIR / "data")
os.environ[cpu_check.CACHE_ENV] = str(RUN_DIR / "cache")
os.environ[MEMORY_ENV] = str(RUN_DIR / "auto-memory")

# The real pair (1.6 GB assembled) is kept across runs in this folder when set, else in pytest's cache folder of the
# checkout (.pytest_cache/d/ssd-chat-offline-pair, also under -p no:cacheprovider; --cache-clear removes it).
PAIR_ENV = "SSD_CHAT_TEST_MODELS"
PAIR_CACHE = "ssd-chat-offline-pair"

VerdictKind = Literal["safe", "amx-dropped", "faulting", "unchecked"]
SEGV = "killed by SIGSEGV: Fatal Python error: Segmentation fault"
DECODED = "decoded a batch of 8 and 2 single tokens with Q4_K_M weights"


def pytest_configure(config: pytest.Config) -> None:
    """A test process is held to a core of its own; pytest-xdist's controller is not (it runs no test, and ``-n auto``
    counts the cores it may use: pinned, it made one worker)."""
    if os.environ.get(cores.WORKER_ENV) or not getattr(config.option, "numprocesses", None):
        cores.pin_to_own_core()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test of the real pair is ``long`` too (README's quick command leaves them to CI's second pass). Tests marked
    ``slow`` (soaks, minutes) run only when asked: ``-m slow`` or ``SSD_CHAT_SLOW_TESTS=1`` (installer tests have
    their own opt-in, ``SSD_CHAT_INSTALLER_TESTS=1``)."""
    for item in items:
        if "realmodels" in item.keywords:
            item.add_marker(pytest.mark.long)
    if os.environ.get("SSD_CHAT_SLOW_TESTS") == "1" or "slow" in str(config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or SSD_CHAT_SLOW_TESTS=1")
    for item in items:
        if "slow" in item.keywords and "installer" not in item.keywords:
            item.add_marker(skip)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(RUN_DIR, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _host_verdict() -> Path:
    """The CPU check's verdict on this host, probed once for the run; its file seeds every test's cache."""
    cpu_check.check()
    return cpu_check.verdict_file()


@pytest.fixture(autouse=True)
def _own_folders(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                 _host_verdict: Path) -> Path:
    """This test's data, cache and planner-memory folders (beside its tmp_path, which stays the test's alone), and
    an empty in-process memo of verdicts."""
    own = tmp_path_factory.mktemp("own")
    monkeypatch.setenv(DATA_ENV, str(own / "data"))
    monkeypatch.setenv(cpu_check.CACHE_ENV, str(own / "cache"))
    monkeypatch.setenv(MEMORY_ENV, str(own / "auto-memory"))
    monkeypatch.setattr(cpu_check, "_memo", {})
    if _host_verdict.exists():  # absent where the host's probe proved nothing (it is then probed again)
        cpu_check.verdict_file().parent.mkdir()
        shutil.copyfile(_host_verdict, cpu_check.verdict_file())
    return own


def make_verdict(kind: Literal["safe", "amx-dropped", "faulting"]) -> cpu_check.Verdict:
    """A verdict of this build and CPU, as the check ends on a host that decodes, faults with AMX only, or faults
    without it too."""
    key, now = cpu_check.build_key(), datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    if kind == "safe":
        return cpu_check.Verdict(True, DECODED, key, now)
    if kind == "amx-dropped":
        return cpu_check.Verdict(True, DECODED, key, now, ("AMX",), SEGV)
    return cpu_check.Verdict(False, f"{SEGV}; without AMX: {SEGV}", key, now)


@pytest.fixture
def cpu_verdict() -> Callable[[VerdictKind], cpu_check.Verdict | None]:
    """Sets the CPU check's verdict for this test (kept in its cache folder) instead of the host's; "unchecked":
    none yet."""

    def set_verdict(kind: VerdictKind) -> cpu_check.Verdict | None:
        cpu_check.verdict_file().unlink(missing_ok=True)
        cpu_check._memo.clear()  # this test's memo (see _own_folders)
        if kind == "unchecked":
            return None
        verdict = make_verdict(kind)
        cpu_check.remember(verdict)
        return verdict

    return set_verdict


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyPair:
    """A tiny target with an identical, a related and an unrelated draft, plus a 16-token pair."""
    return make_pair(tmp_path_factory.mktemp("tiny"))


def _pair_folder(config: pytest.Config) -> Path:
    override = os.environ.get(PAIR_ENV)
    if override:
        return Path(override)
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider: the same folder, named here
    return Path(cache.mkdir(PAIR_CACHE)) if cache is not None else config.rootpath / ".pytest_cache" / "d" / PAIR_CACHE


@pytest.fixture
def all_cores() -> Iterator[int]:
    """Every core of the run for this test (and what it starts), instead of its process's own one; their count."""
    own = frozenset(os.sched_getaffinity(0))
    cores.widen(cores.ALL_CORES)
    yield len(cores.ALL_CORES)
    cores.widen(own)


@pytest.fixture(scope="session")
def real_pair(pytestconfig: pytest.Config) -> offline.OfflinePair:
    """The real Qwen2.5-Coder 1.5B/0.5B pair (offline-models extra), assembled once (see PAIR_ENV)."""
    folder = _pair_folder(pytestconfig)
    pair = offline.installed_pair(folder)
    if pair is None:
        if not offline.extra_installed():
            pytest.skip("the offline-models extra is not installed")
        folder.mkdir(parents=True, exist_ok=True)
        with FileLock(folder / ".assembling.lock"):  # one worker assembles, the others then find it
            pair = offline.installed_pair(folder) or offline.ensure_pair(folder)
    return pair


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A user-data folder inside the test's tmp_path (history, settings, model store), for tests that look into it."""
    d = tmp_path / "userdata"
    monkeypatch.setenv(DATA_ENV, str(d))
    yield d
