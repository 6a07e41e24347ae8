"""The CPU-fault check: a real child process, a real K-quant model, faults forced by an environment switch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import llama_cpp as ll
import pytest

from engine.core import cpu_check
from engine.core.backend import Model
from engine.core.context import Context, ContextParams


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Private cache and data folders, and an empty in-process memo (restored afterwards)."""
    monkeypatch.setenv(cpu_check.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("SSD_CHAT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(cpu_check.FAULT_ENV, raising=False)
    monkeypatch.setattr(cpu_check, "_memo", {})
    return tmp_path


def _no_probe(key: str) -> cpu_check.Verdict:
    raise AssertionError("probed again although a verdict was remembered")


def test_forced_fault_turns_extra_buffers_off_and_is_remembered(isolated: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cpu_check.FAULT_ENV, "SIGILL")
    assert cpu_check.extra_bufts_allowed() is False
    verdict = cpu_check.status().verdict
    assert verdict is not None and not verdict.safe
    assert verdict.detail.startswith("killed by SIGILL")
    stored = json.loads(cpu_check.verdict_file().read_text(encoding="utf-8"))
    assert stored[cpu_check.build_key()]["safe"] is False

    monkeypatch.setattr(cpu_check, "probe", _no_probe)
    monkeypatch.setattr(cpu_check, "_memo", {})  # a new process: only the file remains
    assert cpu_check.extra_bufts_allowed() is False


def test_other_signals_count_as_faults(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cpu_check.FAULT_ENV, "SIGSEGV")
    verdict = cpu_check.check()
    assert not verdict.safe and "SIGSEGV" in verdict.detail


def test_probe_on_this_host_decodes_or_faults(isolated: Path) -> None:
    verdict = cpu_check.check()
    if verdict.safe:
        assert verdict.detail.startswith("decoded a batch")
    else:  # an AMX host that faults: the child died by a signal, not by a Python error
        assert verdict.detail.startswith("killed by")
    assert cpu_check.verdict_file().exists()


def test_a_new_build_is_probed_anew(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cpu_check.FAULT_ENV, "SIGILL")
    old_key = cpu_check.build_key()
    assert not cpu_check.check().safe
    monkeypatch.setattr(ll, "__version__", ll.__version__ + "-other")
    assert cpu_check.build_key() != old_key
    monkeypatch.delenv(cpu_check.FAULT_ENV)
    new = cpu_check.check()
    assert new.key != old_key
    assert cpu_check.remembered(old_key) is not None  # both verdicts kept


def test_the_user_override_beats_the_verdict(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cpu_check.FAULT_ENV, "SIGILL")
    assert cpu_check.extra_bufts_allowed() is False
    cpu_check.set_override("on")
    assert cpu_check.extra_bufts_allowed() is True
    assert cpu_check.status().allowed is True
    cpu_check.set_override("off")
    assert cpu_check.extra_bufts_allowed() is False
    cpu_check.set_override("auto")
    assert cpu_check.status() == cpu_check.Status(cpu_check.status().verdict, "auto", False)
    with pytest.raises(ValueError, match="override must be one of"):
        cpu_check.set_override("maybe")  # type: ignore[arg-type]


def test_a_damaged_override_file_means_auto(isolated: Path) -> None:
    path = cpu_check.override_file()
    path.parent.mkdir(parents=True)
    path.write_text("[not json", encoding="utf-8")
    assert cpu_check.read_override() == "auto"


def test_kquant_model_decodes_in_process_with_the_verdict(isolated: Path) -> None:
    """With the verdict applied, a K-quant model decodes here without a fault, AMX host or not."""
    cpu_check.check()
    path = cpu_check.write_kquant_model(isolated)
    with Model(path) as model, Context(model, ContextParams(n_ctx=128, n_batch=16, n_threads=2,
                                                            n_threads_batch=2)) as ctx:
        tokens = [model.bos, 3, 4, 5, 6, 7, 8]
        rows = ctx.decode(tokens, list(range(len(tokens))), outputs=list(range(len(tokens))))
        assert rows.shape == (len(tokens), model.n_vocab)


def _run(args: list[str], env_extra: dict[str, str], tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, cpu_check.CACHE_ENV: str(tmp / "cache"), "SSD_CHAT_DATA_DIR": str(tmp / "data"), **env_extra}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=300, check=False)


def test_self_test_decodes_a_kquant_model_with_the_fallback(tmp_path: Path) -> None:
    done = _run(["-m", "app", "--self-test"], {cpu_check.FAULT_ENV: "SIGILL"}, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "K-quant (Q4_K_M) decode: 8 tokens with plain CPU kernels (CPU check: killed by SIGILL" in done.stdout
    assert "PASS" in done.stdout


def test_cli_generates_from_a_kquant_model_after_a_fault(tmp_path: Path) -> None:
    model = cpu_check.write_kquant_model(tmp_path)
    done = _run(["-m", "engine", "generate", "--target", str(model), "--mode", "ar", "--prompt", "abc",
                 "--max-tokens", "4"], {cpu_check.FAULT_ENV: "SIGILL"}, tmp_path)
    verdicts = json.loads((tmp_path / "cache" / "cpu-check.json").read_text(encoding="utf-8"))
    assert [v["safe"] for v in verdicts.values()] == [False]
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
