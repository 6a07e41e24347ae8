"""A full disk during ``models offline``, ``pull-file``, ``import`` and ``remove``: one line, exit 2, nothing
half-written.

The disk is a real 1 MiB tmpfs when the tests can mount one (root with CAP_SYS_ADMIN: CI's containers and
this machine); elsewhere every write into the test's folder fails with ENOSPC at the file layer
(``os.fdopen`` and ``Path.open`` are wrapped), which exercises the same error paths.
"""

from __future__ import annotations

import errno
import hashlib
import importlib
import json
import os
import subprocess
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from engine import DiskFullError, ModelStore, hub, offline
from engine.cli.main import main
from tests.hub_server import HubServer, hub_environment
from tests.tiny_models import TinyPair

PART = b"GGUF" + b"m" * (400 << 10)  # three parts: a 1.2 MB model, larger than the disk


class SmallDisk:
    """A folder on a tiny disk: ``fill()`` uses up its space, ``grow()`` gives room again."""

    def __init__(self, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.path = path
        self.real = os.geteuid() == 0 and not os.environ.get("SSD_CHAT_TEST_INJECT_ENOSPC") and self._mount("size=1m")
        self.full = False
        self.limit = 1 << 20  # bytes the injected disk takes
        if not self.real:
            self._inject(monkeypatch)

    def _mount(self, options: str, *, remount: bool = False) -> bool:
        opts = f"remount,{options}" if remount else options
        cmd = ["mount", "-o", opts, str(self.path)] if remount else ["mount", "-t", "tmpfs", "-o", opts, "tmpfs",
                                                                    str(self.path)]
        return subprocess.run(cmd, capture_output=True, check=False).returncode == 0

    def fill(self) -> None:
        self.full = True
        if self.real:
            with (self.path / "filler").open("wb", buffering=0) as f, pytest.raises(OSError, match="No space left"):
                while True:
                    f.write(b"\0" * (64 << 10))

    def grow(self) -> None:
        self.full = False
        self.limit = 1 << 40
        if self.real:
            (self.path / "filler").unlink(missing_ok=True)
            assert self._mount("size=16m", remount=True)

    def close(self) -> None:
        if self.real:
            subprocess.run(["umount", "-l", str(self.path)], check=False)

    def files(self) -> list[str]:
        return sorted(str(p.relative_to(self.path)) for p in self.path.rglob("*") if p.name != "filler")

    # -- without a mount: ENOSPC from every write under the folder once it is "full" (or past 1 MiB)
    def _inject(self, monkeypatch: pytest.MonkeyPatch) -> None:
        disk = self
        written = [0]

        class Full:
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def write(self, data: Any) -> int:
                written[0] += len(data)
                if disk.full or written[0] > disk.limit:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                return int(self.inner.write(data))

            def __getattr__(self, name: str) -> Any:
                return getattr(self.inner, name)

            def __enter__(self) -> Full:
                return self

            def __exit__(self, *exc: object) -> None:
                self.inner.close()

        def under(path: object) -> bool:
            return str(path).startswith(str(disk.path))

        real_fdopen, real_open = os.fdopen, Path.open

        def fdopen(fd: int, *args: Any, **kwargs: Any) -> Any:
            f = real_fdopen(fd, *args, **kwargs)
            return Full(f) if under(os.readlink(f"/proc/self/fd/{fd}")) and "r" not in str(args[:1]) else f

        def path_open(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            f = real_open(self, mode, *args, **kwargs)
            return Full(f) if under(self) and mode != "r" and mode != "rb" else f

        monkeypatch.setattr(os, "fdopen", fdopen)
        monkeypatch.setattr(Path, "open", path_open)


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SmallDisk]:
    folder = tmp_path / "disk"
    folder.mkdir()
    d = SmallDisk(folder, monkeypatch)
    try:
        yield d
    finally:
        d.close()


def one_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


# -- models offline --------------------------------------------------------------------------------
@pytest.fixture
def fake_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> offline.OfflineModel:
    site = tmp_path / "site"
    for i in range(1, 4):
        pkg = site / f"fulldisk_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(PART)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    blob = PART * 3
    model = offline.OfflineModel("target", "t.gguf", "fulldisk_part", 3, len(blob), hashlib.sha256(blob).hexdigest())
    monkeypatch.setattr(offline, "TARGET", model)
    monkeypatch.setattr(offline, "DRAFT", offline.OfflineModel("draft", "d.gguf", "fulldisk_part", 3, len(blob),
                                                               model.sha256))
    return model


def test_offline_is_refused_before_writing(
    disk: SmallDisk, fake_offline: offline.OfflineModel, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    if not disk.real:
        monkeypatch.setattr(offline, "free_bytes", lambda _p: 1 << 19)
    line = one_error(capsys, ["models", "offline", "--dest", str(disk.path), "--quiet"])
    assert "not enough disk space" in line and "the offline pair needs 2.5 MB" in line
    assert disk.files() == []


def test_offline_disk_filling_up_mid_write(
    disk: SmallDisk, fake_offline: offline.OfflineModel, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.setattr(offline, "free_bytes", lambda _p: 1 << 40)  # past the check: the write itself fails
    line = one_error(capsys, ["models", "offline", "--dest", str(disk.path), "--quiet"])
    assert line.startswith("error: the disk is full: the target model could not be written in")
    assert disk.files() == []  # no partial model, no stamp
    disk.grow()
    assert main(["models", "offline", "--dest", str(disk.path), "--quiet"]) == 0
    assert (disk.path / "t.gguf").read_bytes() == PART * 3


# -- pull-file ---------------------------------------------------------------------------------
def test_pull_file_disk_filling_up_mid_download(
    disk: SmallDisk, tiny: TinyPair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = tiny.target.read_bytes()
    assert len(data) > 1 << 20
    # the client hangs up mid-body when the disk fills: keep the test server's broken-pipe report off stderr
    monkeypatch.setattr(ThreadingHTTPServer, "handle_error", lambda *_a: None)
    with HubServer() as srv:
        hub_environment(monkeypatch, srv.url, str(tmp_path / "hf-home"))
        srv.state.add("acme/t", "t.gguf", data)
        argv = ["models", "pull-file", "acme/t", "t.gguf", "--dest", str(disk.path), "--quiet"]
        if not disk.real:
            monkeypatch.setattr(hub, "free_bytes", lambda _p: 1 << 20)
        assert "not enough disk space" in one_error(capsys, argv)  # refused up front
        monkeypatch.setattr(hub, "free_bytes", lambda _p: 1 << 40)  # past the check: the disk fills up
        line = one_error(capsys, argv)
        assert line.startswith("error: the disk is full: t.gguf could not be written in")
        assert "running it again resumes" in line
        assert not (disk.path / "t.gguf").exists()  # never a half-written model under its name
        assert [n for n in disk.files() if not n.endswith(".incomplete")] == []
        disk.grow()
        assert main(argv) == 0
        assert capsys.readouterr().out.strip() == str(disk.path / "t.gguf")
        assert (disk.path / "t.gguf").read_bytes() == data
        assert disk.files() == ["t.gguf", "t.gguf.verified"]


# -- import and remove: the registry -------------------------------------------------------------
def test_import_on_a_full_disk_changes_nothing(
    disk: SmallDisk, tiny: TinyPair, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SSD_CHAT_DATA_DIR", str(disk.path))
    assert main(["models", "import", "--target", str(tiny.target), "--draft", str(tiny.draft_same)]) == 0
    registry = ModelStore().registry_path
    before = registry.read_bytes()
    disk.fill()
    line = one_error(capsys, ["models", "import", "--target", str(tiny.target), "--draft", str(tiny.draft_related)])
    assert line.startswith("error: the disk is full: the model registry could not be written in")
    assert registry.read_bytes() == before
    assert [n for n in disk.files() if n.endswith(".tmp")] == []


def test_remove_on_a_full_disk(
    disk: SmallDisk, tiny: TinyPair, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SSD_CHAT_DATA_DIR", str(disk.path))
    store = ModelStore()
    imported = store.import_pair(tiny.target, tiny.draft_same)
    before = store.registry_path.read_bytes()
    disk.fill()
    line = one_error(capsys, ["models", "remove", imported.id])
    assert line.startswith("error: the disk is full: the model registry could not be written in")
    assert store.registry_path.read_bytes() == before and tiny.target.is_file()
    assert [n for n in disk.files() if n.endswith(".tmp")] == []


def test_removing_a_downloaded_pair_makes_its_own_room(
    disk: SmallDisk, tiny: TinyPair, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The user frees space by removing a pair: its files go first, then the registry is rewritten."""
    if not disk.real:
        pytest.skip("needs a real tmpfs: deleting files must give the space back")
    disk.grow()
    monkeypatch.setenv("SSD_CHAT_DATA_DIR", str(disk.path))
    store = ModelStore()
    folder = store.hub_dir("acme/tiny")
    folder.mkdir(parents=True)
    t, d = folder / "t.gguf", folder / "d.gguf"
    t.write_bytes(tiny.target.read_bytes())
    d.write_bytes(tiny.draft_same.read_bytes())
    store.register("tiny", "Tiny", t, d, "hub")
    disk.fill()
    assert main(["models", "remove", "tiny"]) == 0
    assert capsys.readouterr().out.strip() == "removed tiny"
    assert not t.exists() and not d.exists()
    assert json.loads(store.registry_path.read_text())["pairs"] == []


def test_disk_full_error_is_an_engine_error() -> None:
    from engine.core.diskio import write_error

    err = write_error(OSError(errno.ENOSPC, "No space left on device"), Path("/x/y"), "the model registry")
    assert isinstance(err, DiskFullError) and "free some space" in str(err)
    other = write_error(OSError(errno.EROFS, "Read-only file system"), Path("/x/y"), "the model registry")
    assert not isinstance(other, DiskFullError) and "Read-only file system" in str(other)
