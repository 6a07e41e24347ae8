"""The release pipeline: ``--self-test``, installer/build.py, the NSIS script and the release workflow.

Always on: the in-process self-test (pass and two ways to fail), build.py's helpers, and the
workflow's shape. Opt-in with ``SSD_CHAT_INSTALLER_TESTS=1`` (marker ``installer``): compiling the
NSIS script with makensis, and freezing the app with PyInstaller and running the frozen self-test
(minutes).
"""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml  # PyYAML: a dependency of huggingface-hub, so always installed with ssd-chat

from app.startup import selftest
from engine import Engine

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
BUILD_PY = ROOT / "installer" / "build.py"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]

opt_in = pytest.mark.skipif(
    os.environ.get("SSD_CHAT_INSTALLER_TESTS") != "1",
    reason="installer tests are opt-in: set SSD_CHAT_INSTALLER_TESTS=1",
)


@pytest.fixture(scope="module")
def build() -> ModuleType:
    """installer/build.py, imported as a module (installer/ is not a package)."""
    spec = importlib.util.spec_from_file_location("ssd_chat_build", BUILD_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# -- the self-test, in process --------------------------------------------------------------------


def test_self_test_passes() -> None:
    out = io.StringIO()
    assert selftest.run_self_test(out=out) == 0, out.getvalue()
    report = out.getvalue()
    assert "GPU offload supported:" in report
    n = selftest.MAX_TOKENS
    assert f"PASS: ssd greedy == ar greedy (ar {n} tokens, ssd {n} tokens, all equal" in report
    assert "hit rate" in report


def test_self_test_fails_when_ssd_diverges(monkeypatch: pytest.MonkeyPatch) -> None:
    """A speculative run that returns one wrong token must turn the self-test red."""
    real_generate = Engine.generate

    def corrupting_generate(self: Engine, prompt: Sequence[int], params: Any, stop: Any = None) -> Any:
        gen = real_generate(self, prompt, params, stop)
        if params.mode == "ssd":
            real_run = gen.run

            def run(on_token: Any = None) -> Any:
                done = real_run(on_token)
                done.tokens[5] += 1
                return done

            gen.run = run  # type: ignore[method-assign]
        return gen

    monkeypatch.setattr(Engine, "generate", corrupting_generate)
    out = io.StringIO()
    assert selftest.run_self_test(out=out) == 1
    assert "FAIL: ssd differs from ar at position 5" in out.getvalue()


def test_self_test_fails_when_llama_cpp_does_not_load(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> str:
        raise OSError("libllama.so: cannot open shared object file")

    monkeypatch.setattr(selftest, "check_llama_cpp", broken)
    out = io.StringIO()
    assert selftest.run_self_test(out=out) == 2
    assert "FAIL: llama.cpp could not be loaded: OSError: libllama.so" in out.getvalue()


def test_self_test_without_stdout_writes_a_log(monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> None:
    """The windowed Windows exe has ``sys.stdout is None``; the report then goes to the data folder."""
    monkeypatch.setattr(sys, "stdout", None)
    assert selftest.run_self_test(max_tokens=8) == 0
    assert "PASS" in (data_dir / "selftest.log").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [([1, 2, 3], [1, 2, 3], None), ([1, 2, 3], [1, 9, 3], 1), ([1, 2], [1, 2, 3], 2), ([], [], None)],
)
def test_first_difference(a: list[int], b: list[int], expected: int | None) -> None:
    assert selftest.first_difference(a, b) == expected


def test_empty_ar_output_is_a_failure() -> None:
    result = selftest.SelfTestResult([], [], None, None, 0.0)
    assert not result.ok
    assert "FAIL: ar produced no tokens" in result.summary()


# -- installer/build.py ---------------------------------------------------------------------------


def test_build_reads_the_version_from_pyproject(build: ModuleType) -> None:
    assert build.project_version() == VERSION
    assert build.installer_name(VERSION) == f"ssd-chat-{VERSION}-setup.exe"


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.1.0", "0.1.0.0"), ("1.2.3rc1", "1.2.3.0"), ("2.0", "2.0.0.0"), ("1.2.3+g1", "1.2.3.0")],
)
def test_windows_version_has_four_numbers(build: ModuleType, version: str, expected: str) -> None:
    assert build.windows_version(version) == expected


def test_build_checks_the_environment_against_pyproject(build: ModuleType, tmp_path: Path) -> None:
    assert build.unmet_requirements() == []
    fake = tmp_path / "pyproject.toml"
    fake.write_text('[project]\nversion = "1.0"\ndependencies = ["numpy<1", "surely-not-installed-pkg>=1",'
                    ' "pytest; python_version < \'3\'"]\n', encoding="utf-8")
    problems = build.unmet_requirements(fake)
    assert len(problems) == 2
    assert problems[0].startswith("numpy ") and "wants 'numpy<1'" in problems[0]
    assert "surely-not-installed-pkg is not installed" in problems[1]


def test_build_fails_clearly_on_a_missing_folder(
    build: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert build.main(["--nsis-only", str(tmp_path / "nope"), "--dist", str(tmp_path)]) == 1
    assert "build.py: error:" in capsys.readouterr().err


# -- the release workflow ---------------------------------------------------------------------------


def _workflow() -> dict[str, Any]:
    doc = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def _steps_text(job: dict[str, Any]) -> str:
    return "\n".join(f"{s.get('uses', '')} {s.get('run', '')} {s.get('with', '')}" for s in job["steps"])


def test_workflow_triggers_and_jobs() -> None:
    doc = _workflow()
    triggers = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as True
    assert set(triggers) == {"push", "workflow_dispatch"}
    assert triggers["push"]["tags"]
    assert set(doc["jobs"]) == {"windows", "macos"}


def test_workflow_windows_matrix() -> None:
    job = _workflow()["jobs"]["windows"]
    assert job["runs-on"] == "windows-latest"
    entries = {e["variant"]: e for e in job["strategy"]["matrix"]["include"]}
    assert set(entries) == {"cpu", "cuda"}
    assert "-DGGML_NATIVE=OFF" in entries["cpu"]["cmake_args"]
    assert "-DGGML_CUDA=on" in entries["cuda"]["cmake_args"]
    assert "-DGGML_NATIVE=OFF" in entries["cuda"]["cmake_args"]
    assert job["env"]["CMAKE_ARGS"] == "${{ matrix.cmake_args }}"
    steps = _steps_text(job)
    for needle in ("Jimver/cuda-toolkit", '-e ".[dev]"', "pytest", "installer/build.py --require-nsis",
                   "actions/upload-artifact", "setup.exe", "choco install nsis"):
        assert needle in steps, needle


def test_workflow_macos_job() -> None:
    job = _workflow()["jobs"]["macos"]
    assert job["runs-on"] == "macos-latest"
    assert "-DGGML_METAL=on" in job["env"]["CMAKE_ARGS"]
    steps = _steps_text(job)
    for needle in ("pytest", "installer/build.py --skip-nsis", "actions/upload-artifact", "macos.zip"):
        assert needle in steps, needle


# -- opt-in: makensis and PyInstaller -----------------------------------------------------------


@pytest.mark.installer
@opt_in
def test_nsis_script_compiles(build: ModuleType, tmp_path: Path) -> None:
    if build.find_makensis() is None:
        pytest.skip("makensis not found (apt-get install nsis)")
    onedir = tmp_path / "ssd-chat"
    (onedir / "_internal").mkdir(parents=True)
    (onedir / "ssd-chat.exe").write_bytes(b"MZ fake app")
    (onedir / "ssd-chat-cli.exe").write_bytes(b"MZ fake cli")
    (onedir / "_internal" / "data.bin").write_bytes(os.urandom(4096))
    assert build.main(["--nsis-only", str(onedir), "--dist", str(tmp_path / "out")]) == 0
    setup = tmp_path / "out" / f"ssd-chat-{VERSION}-setup.exe"
    assert setup.is_file()
    assert setup.read_bytes()[:2] == b"MZ"
    assert setup.stat().st_size > 40_000


@pytest.mark.installer
@pytest.mark.slow
@pytest.mark.timeout(1200)
@opt_in
def test_frozen_build_self_test(build: ModuleType, tmp_path: Path) -> None:
    """Freeze with PyInstaller (a minute or more) and run the frozen ``ssd-chat-cli --self-test``.

    makensis is left to ``test_nsis_script_compiles``: compressing the real 250 MB bundle takes
    minutes more and proves nothing that test does not.
    """
    dist = tmp_path / "dist"
    proc = subprocess.run(
        [sys.executable, str(BUILD_PY), "--skip-nsis", "--dist", str(dist), "--work", str(tmp_path / "work")],
        cwd=ROOT, capture_output=True, text=True, timeout=1100,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "ssd-chat self-test: PASS" in proc.stdout
    internal = dist / "ssd-chat" / "_internal"
    assert f"library {internal / 'llama_cpp' / 'lib'}" in proc.stdout  # the bundled copy, not the venv's
    assert (internal / "resources" / "llama-spm-vocab-4k.json").is_file()
    assert any((internal / "PySide6" / "Qt" / "plugins" / "platforms").iterdir())


@pytest.mark.installer
@opt_in
def test_frozen_self_test_fails_without_llama_cpp(tmp_path: Path) -> None:
    """Reuses a frozen build in dist/ (from build.py) if there is one; a bundle lacking libllama fails."""
    built = ROOT / "dist" / "ssd-chat"
    cli = built / ("ssd-chat-cli.exe" if sys.platform == "win32" else "ssd-chat-cli")
    if not cli.is_file():
        pytest.skip("no frozen build in dist/ssd-chat: run python installer/build.py first")
    broken = tmp_path / "ssd-chat"
    shutil.copytree(built, broken, symlinks=True)
    for lib in (broken / "_internal" / "llama_cpp" / "lib").glob("*llama.*"):
        lib.unlink()
    env = {**os.environ, "SSD_CHAT_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.run([str(broken / cli.name), "--self-test"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "FAIL: llama.cpp could not be loaded" in proc.stdout
