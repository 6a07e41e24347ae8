"""The CPU-fault check: a real child process, a real K-quant model, faults forced by an environment switch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import llama_cpp as ll
import pytest

from app.settings.cpu_kernels import verdict_text
from engine.core import cpu_check
from engine.core.backend import Model
from engine.core.context import Context, ContextParams
from engine.native import bufts, symbols
from engine.process import cpu_probe


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Private cache and data folders, and an empty in-process memo (restored afterwards)."""
    monkeypatch.setenv(cpu_check.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("SSD_CHAT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(cpu_check.FAULT_ENV, raising=False)
    monkeypatch.setattr(cpu_check, "_memo", {})
    return tmp_path


def _no_probe(key: str) -> tuple[cpu_check.Verdict, bool]:
    raise AssertionError("probed again although a verdict was remembered")


def _needs_amx_and_repack() -> None:
    found = bufts.available()
    if "AMX" not in found or bufts.REPACK not in found:
        pytest.skip(f"this build offers the extra CPU buffer types {list(found)}, not AMX and CPU_REPACK")


@pytest.fixture
def restore_bufts() -> Iterator[None]:
    """Put llama.cpp's buffer type list back as it was (a later in-process load must not get AMX back)."""
    before = set(bufts.available()) - set(bufts.in_use())
    yield
    bufts.use_all_but(before)


def test_forced_fault_turns_extra_buffers_off_and_is_remembered(isolated: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cpu_check.FAULT_ENV, "SIGILL")
    assert cpu_check.extra_bufts_plan() == (False, ())
    verdict = cpu_check.status().verdict
    assert verdict is not None and not verdict.safe
    assert verdict.detail.startswith("killed by SIGILL")
    stored = json.loads(cpu_check.verdict_file().read_text(encoding="utf-8"))
    assert stored[cpu_check.build_key()]["safe"] is False

    monkeypatch.setattr(cpu_check, "_probe", [_no_probe])
    monkeypatch.setattr(cpu_check, "_memo", {})  # a new process: only the file remains
    assert cpu_check.extra_bufts_plan() == (False, ())


def test_a_fault_only_with_amx_keeps_the_repacked_kernels(isolated: Path, monkeypatch: pytest.MonkeyPatch,
                                                          restore_bufts: None,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    _needs_amx_and_repack()
    monkeypatch.setenv(cpu_check.FAULT_ENV, "SIGILL:AMX")  # the child faults while AMX is in the list
    verdict = cpu_check.check()
    assert ("CPU check: this CPU's AMX unit is not usable here; ssd-chat uses its other fast kernels (repacked "
            "weights). With AMX on, the check's child was killed by SIGILL") in caplog.text  # the log keeps the signal
    assert verdict.safe and verdict.dropped == ("AMX",)
    assert verdict.fault.startswith("killed by SIGILL") and verdict.detail.startswith("decoded a batch")
    assert cpu_check.extra_bufts_plan() == (True, ("AMX",))
    assert cpu_check.status() == cpu_check.Status(verdict, "auto", True, ("AMX",))
    assert verdict_text(cpu_check.status()).endswith(
        "— on, without AMX: this CPU's AMX unit failed the test on this computer, so ssd-chat uses the rest of the "
        "fast code")
    stored = json.loads(cpu_check.verdict_file().read_text(encoding="utf-8"))[verdict.key]
    assert stored["dropped"] == ["AMX"] and stored["safe"] is True

    monkeypatch.setattr(cpu_check, "_probe", [_no_probe])
    monkeypatch.setattr(cpu_check, "_memo", {})  # a new process: only the file remains
    assert cpu_check.check() == verdict
    path = cpu_probe.write_kquant_model(isolated)
    with Model(path):  # the load drops AMX from llama.cpp's list and keeps CPU_REPACK
        assert bufts.in_use() == (bufts.REPACK,)
    cpu_check.set_override("on")  # all of them again (only the plan: AMX faults here for real)
    assert cpu_check.extra_bufts_plan() == (True, ())
    assert cpu_check.status().dropped == ()


def test_a_fault_without_amx_too_turns_all_extra_buffers_off(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_amx_and_repack()
    monkeypatch.setenv(cpu_check.FAULT_ENV, "SIGILL:CPU_REPACK")  # still in the list in the second child
    verdict = cpu_check.check()
    assert not verdict.safe and verdict.dropped == ()
    assert verdict.detail.startswith("killed by SIGILL") and "; without AMX: killed by SIGILL" in verdict.detail
    assert cpu_check.extra_bufts_plan() == (False, ())
    assert verdict_text(cpu_check.status()) == (
        "Fast CPU code for quantized models (AMX) — off: it failed the test on this computer, so ssd-chat uses the "
        "plain CPU code (slower)")


def test_bufts_drop_by_name_and_come_back(restore_bufts: None) -> None:
    found = bufts.available()
    if not found:
        pytest.skip("this build offers no extra CPU buffer types")
    assert bufts.use_all_but(found[:1]) == found[1:] == bufts.in_use()
    assert bufts.use_all_but(found[:1]) == found[1:]  # idempotent
    assert bufts.use_all_but(["NO-SUCH-TYPE"]) == found
    assert bufts.use_all_but(found) == ()
    assert bufts.use_all_but([]) == found == bufts.available()


def test_a_build_without_the_list_loads_without_extra_buffers(isolated: Path, monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    from engine.core import backend

    monkeypatch.setenv(cpu_check.CHILD_ENV, "AMX")  # a plan that drops AMX
    monkeypatch.setattr(bufts, "_table", None)
    monkeypatch.setattr(symbols, "_libs", [])  # as if ggml's libraries exported none of the functions
    with pytest.raises(bufts.BuftError, match="ggml_backend_dev_backend_reg"):
        bufts.available()
    assert backend._extra_bufts() is False
    assert "cannot drop llama.cpp's AMX buffer type" in caplog.text
    monkeypatch.setenv(cpu_check.CHILD_ENV, "")  # nothing to drop: the list is never looked up
    assert backend._extra_bufts() is True


def test_interleaved_fault_reports_read_as_one(tmp_path: Path) -> None:
    path = tmp_path / "stderr.txt"
    path.write_text("x\nFatal Python error: Fatal Python error: Illegal instructionIllegal instruction\n\nThread 1",
                    encoding="utf-8")
    assert cpu_probe._fault_line(path) == "Fatal Python error: Illegal instruction"
    path.write_text("Fatal Python error: Segmentation fault\nCurrent thread", encoding="utf-8")
    assert cpu_probe._fault_line(path) == "Fatal Python error: Segmentation fault"


def test_a_child_failing_without_a_fault_is_not_remembered(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cpu_check.FAULT_ENV, "NO_SUCH_SIGNAL")  # a KeyError in the child: a Python error
    verdict = cpu_check.check()
    assert verdict.safe and verdict.detail.startswith("probe failed without a fault (exit 1)")
    assert "KeyError" in verdict.detail
    assert not cpu_check.verdict_file().exists() and cpu_check.remembered(verdict.key) is None


def test_other_signals_count_as_faults(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cpu_check.FAULT_ENV, "SIGSEGV")
    verdict = cpu_check.check()
    assert not verdict.safe and "SIGSEGV" in verdict.detail


def test_probe_on_this_host_decodes_or_faults(isolated: Path) -> None:
    verdict = cpu_check.check()
    if verdict.safe:
        assert verdict.detail.startswith("decoded a batch")
        assert verdict.fault.startswith("killed by") if verdict.dropped else not verdict.fault
    else:  # a host that faults without AMX too: the children died by a signal, not by a Python error
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
    assert cpu_check.extra_bufts_plan() == (False, ())
    cpu_check.set_override("on")
    assert cpu_check.extra_bufts_plan() == (True, ())
    assert cpu_check.status().allowed is True
    cpu_check.set_override("off")
    assert cpu_check.extra_bufts_plan() == (False, ())
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
    """With the real probe's verdict applied, a K-quant model decodes here without a fault, AMX host or not."""
    verdict = cpu_check.check()
    path = cpu_probe.write_kquant_model(isolated)
    with Model(path) as model, Context(model, ContextParams(n_ctx=128, n_batch=16, n_threads=2,
                                                            n_threads_batch=2)) as ctx:
        if verdict.dropped:  # an AMX host that faults in AMX only: the repacked kernels stay
            assert verdict.safe and not set(verdict.dropped) & set(bufts.in_use())
            assert bufts.REPACK in bufts.in_use()
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
    model = cpu_probe.write_kquant_model(tmp_path)
    done = _run(["-m", "engine", "generate", "--target", str(model), "--mode", "ar", "--prompt", "abc",
                 "--max-tokens", "4"], {cpu_check.FAULT_ENV: "SIGILL"}, tmp_path)
    verdicts = json.loads((tmp_path / "cache" / "cpu-check.json").read_text(encoding="utf-8"))
    assert [v["safe"] for v in verdicts.values()] == [False]
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
