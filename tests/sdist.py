"""The llama.cpp that the pinned llama-cpp-python sdist vendors: its chat templates, vocabularies and chat tests."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

SRC_ENV = "SSD_CHAT_LLAMA_SRC"  # a vendor/llama.cpp folder already on disk: no download
CACHE_NAME = "llama-cpp-sdist"  # pytest's cache folder for it (.pytest_cache/d/...), never HOME
VENDOR = "vendor/llama.cpp/"
# What the tests read, as paths under vendor/llama.cpp (a folder ends in "/", a vocabulary is a prefix).
NEEDED = ("models/templates/", "models/ggml-vocab-", "tests/test-chat.cpp")
DONE = ".complete"  # written last: a run cut short mid-unpack is unpacked again
DOWNLOAD_TIMEOUT_S = 600  # the sdist is some tens of MB; pip gives up sooner when the index cannot be reached
ROOT = Path(__file__).resolve().parent.parent


def pinned_version() -> str:
    """The llama-cpp-python version pyproject.toml names (its lowest allowed)."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        m = re.match(r"llama-cpp-python\s*(?:==|>=|~=)\s*([\w.]+)", dep)
        if m:
            return m.group(1)
    raise LookupError("pyproject.toml names no llama-cpp-python version")


def _cache_folder(config: pytest.Config, version: str) -> Path:
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider: the same folder, named here
    name = f"{CACHE_NAME}-{version}"
    return Path(cache.mkdir(name)) if cache is not None else config.rootpath / ".pytest_cache" / "d" / name


def _download(version: str, into: Path) -> Path:
    """The sdist's file, downloaded by pip into ``into``; a skip when pip cannot get it."""
    into.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
            f"llama-cpp-python=={version}", "-d", str(into), "--quiet",
            "--no-cache-dir"]  # pip's cache lives in HOME, which the tests never write into
    try:
        # pip prepares the sdist's metadata in a build environment whose tools write into HOME (~/.rustup...):
        # they get a HOME of their own inside the download folder, which is removed with it
        home = into / "home"
        home.mkdir(exist_ok=True)
        env = {**os.environ, "HOME": str(home), "CARGO_HOME": str(home / "cargo"), "RUSTUP_HOME": str(home / "rustup")}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S, check=False, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"the llama-cpp-python {version} sdist could not be downloaded ({exc}); set {SRC_ENV}")
    found = sorted(into.glob("llama_cpp_python-*.tar.gz"))
    if done.returncode != 0 or not found:
        why = (done.stderr.strip().splitlines() or ["no file"])[-1]
        pytest.skip(f"pip could not download the llama-cpp-python {version} sdist ({why}); set {SRC_ENV} to a "
                    "vendor/llama.cpp folder instead")
    return found[-1]


def _unpack(archive: Path, dest: Path) -> None:
    """The :data:`NEEDED` files of the sdist's vendor/llama.cpp, into ``dest``."""
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            _, _, inner = member.name.partition("/")
            rel = inner.removeprefix(VENDOR) if inner.startswith(VENDOR) else None
            if rel and member.isfile() and rel.startswith(NEEDED):
                member.name = rel
                members.append(member)
        tar.extractall(dest, members=members, filter="data")


def llama_source(config: pytest.Config) -> Path:
    """The vendor/llama.cpp folder: :data:`SRC_ENV` where set, else unpacked once into pytest's cache."""
    override = os.environ.get(SRC_ENV)
    if override:
        path = Path(override)
        if not (path / "models" / "templates").is_dir():
            pytest.skip(f"{SRC_ENV}={override} has no models/templates folder")
        return path
    version = pinned_version()
    folder = _cache_folder(config, version)
    dest = folder / "llama.cpp"
    if (dest / DONE).exists():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    archive = _download(version, folder / "download")
    _unpack(archive, dest)
    shutil.rmtree(folder / "download", ignore_errors=True)  # only the unpacked files are kept
    (dest / DONE).write_text(archive.name)
    return dest


@pytest.fixture(scope="session")
def llama_src(pytestconfig: pytest.Config) -> Path:
    """The pinned llama-cpp-python sdist's vendor/llama.cpp folder (models/templates, models/ggml-vocab-*.gguf,
    tests/test-chat.cpp), downloaded once; the test is skipped where pip cannot reach the package index."""
    return llama_source(pytestconfig)
