"""The offline pair: assembling GGUF files from part packages, idempotence, clear errors."""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine import offline
from engine.cli.main import main

PARTS = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5]


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> offline.OfflineModel:
    """Three importable part packages ``fakeoff_partN`` holding ``data/partNN.bin``."""
    site = tmp_path / "site"
    for i, data in enumerate(PARTS, 1):
        pkg = site / f"fakeoff_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    blob = b"".join(PARTS)
    return offline.OfflineModel("target", "fake.gguf", "fakeoff_part", 3, len(blob), hashlib.sha256(blob).hexdigest())


def test_assembles_and_verifies(fake_model: offline.OfflineModel, tmp_path: Path) -> None:
    out = offline.assemble(fake_model, tmp_path / "store")
    assert out.read_bytes() == b"".join(PARTS)
    assert offline.checksum_matches(out, fake_model)
    assert [p.name for p in (tmp_path / "store").iterdir() if p.name.endswith(".part")] == []


def test_second_call_does_not_rewrite(fake_model: offline.OfflineModel, tmp_path: Path) -> None:
    out = offline.assemble(fake_model, tmp_path / "store")
    before = out.stat()
    seen: list[int] = []
    again = offline.assemble(fake_model, tmp_path / "store", lambda _r, done, _t: seen.append(done))
    after = again.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert seen == []  # nothing was read from the parts


def test_changed_file_is_rebuilt(fake_model: offline.OfflineModel, tmp_path: Path) -> None:
    out = offline.assemble(fake_model, tmp_path / "store")
    out.write_bytes(b"GGUF" + b"x" * (fake_model.size - 4))  # same size, different content
    assert not offline.checksum_matches(out, fake_model)  # the stamp no longer matches the mtime
    offline.assemble(fake_model, tmp_path / "store")
    assert out.read_bytes() == b"".join(PARTS)


def test_missing_part_package(fake_model: offline.OfflineModel, tmp_path: Path) -> None:
    shutil.rmtree(tmp_path / "site" / "fakeoff_part2")
    importlib.invalidate_caches()
    sys.modules.pop("fakeoff_part2", None)
    with pytest.raises(offline.OfflineModelsError, match="part package fakeoff-part2 is missing"):
        offline.assemble(fake_model, tmp_path / "store")
    assert not (tmp_path / "store" / "fake.gguf").exists()


def test_checksum_mismatch_leaves_nothing(fake_model: offline.OfflineModel, tmp_path: Path) -> None:
    bad = offline.OfflineModel(fake_model.role, fake_model.filename, fake_model.package_prefix, 3,
                               fake_model.size, "0" * 64)
    with pytest.raises(offline.OfflineModelsError, match="checksum mismatch"):
        offline.assemble(bad, tmp_path / "store")
    assert list((tmp_path / "store").iterdir()) == []


def test_size_mismatch(fake_model: offline.OfflineModel, tmp_path: Path) -> None:
    bad = offline.OfflineModel("draft", "d.gguf", fake_model.package_prefix, 3, fake_model.size + 1, fake_model.sha256)
    with pytest.raises(offline.OfflineModelsError, match="parts add up to"):
        offline.assemble(bad, tmp_path / "store")


def test_extra_not_installed(tmp_path: Path) -> None:
    ghost = offline.OfflineModel("draft", "g.gguf", "no_such_pkg_part", 2, 10, "0" * 64)
    with pytest.raises(offline.OfflineModelsError, match=r"pip install \"ssd-chat\[offline-models\]\""):
        offline.assemble(ghost, tmp_path)


def test_cli_reports_one_line(
    fake_model: offline.OfflineModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    draft = offline.OfflineModel("draft", "fake-draft.gguf", "fakeoff_part", 3, fake_model.size, fake_model.sha256)
    monkeypatch.setattr(offline, "TARGET", fake_model)
    monkeypatch.setattr(offline, "DRAFT", draft)
    assert main(["models", "offline", "--dest", str(tmp_path / "s"), "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"target: {tmp_path / 's' / 'fake.gguf'}", f"draft: {tmp_path / 's' / 'fake-draft.gguf'}"]
    shutil.rmtree(tmp_path / "site" / "fakeoff_part3")
    importlib.invalidate_caches()
    sys.modules.pop("fakeoff_part3", None)
    assert main(["models", "offline", "--dest", str(tmp_path / "t"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: part package fakeoff-part3 is missing: reinstall the offline-models extra"]


@pytest.mark.realmodels
def test_real_offline_pair_cli(real_pair: offline.OfflinePair) -> None:
    """The real pair: pinned SHA-256 (checked when assembled), and a second call rewrites nothing."""
    assert offline.checksum_matches(real_pair.target, offline.TARGET)
    assert offline.checksum_matches(real_pair.draft, offline.DRAFT)
    before = [(p.stat().st_ino, p.stat().st_mtime_ns) for p in (real_pair.target, real_pair.draft)]
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "engine", "models", "offline", "--dest", str(real_pair.target.parent)],
                       capture_output=True, text=True, timeout=120, check=False, env={**os.environ})
    elapsed = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"target: {real_pair.target}", f"draft: {real_pair.draft}"]
    after = [(p.stat().st_ino, p.stat().st_mtime_ns) for p in (real_pair.target, real_pair.draft)]
    assert after == before
    print(f"second `models offline` call: {elapsed:.2f} s (including interpreter start)")
