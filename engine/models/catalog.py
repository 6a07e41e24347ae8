"""The curated catalog of target/draft pairs (``resources/catalog.json``) and memory-fit estimates."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core.paths import resources_dir
from engine.errors import EngineError

CATALOG_ENV = "SSD_CHAT_CATALOG"
KV_BYTES_PER_ELEMENT = 2  # f16 K and V caches, llama.cpp's default
UBATCH = 512  # llama.cpp's default n_ubatch: the logits buffer a GPU backend allocates per model


@dataclass(frozen=True)
class FileSpec:
    """One GGUF file on the Hub.

    Attributes:
        repo: Repository id, e.g. ``"bartowski/Qwen2.5-7B-Instruct-GGUF"``.
        filename: File name inside the repository.
        size: Size in bytes (from the model card; the Hub's own figure is used at download time).
        sha256: Expected SHA-256, or None to take it from the Hub's ``X-Linked-Etag`` at download time.
        quant: Quantisation, e.g. ``"Q4_K_M"``.
    """

    repo: str
    filename: str
    size: int
    sha256: str | None
    quant: str


@dataclass(frozen=True)
class Arch:
    """The numbers the KV-cache estimate uses for one model."""

    n_layer: int
    n_kv_head: int
    head_dim: int
    n_vocab: int

    def kv_bytes(self, n_ctx: int) -> int:
        """Bytes of an f16 K+V cache for ``n_ctx`` positions."""
        return self.n_layer * self.n_kv_head * self.head_dim * 2 * KV_BYTES_PER_ELEMENT * n_ctx


@dataclass(frozen=True)
class PairSpec:
    """A curated target/draft pair.

    Attributes:
        id: Stable identifier used by the CLI and the store.
        name: Display name.
        target: The target model's file.
        draft: The draft model's file.
        context_length: The target's trained context length.
        licence: Licence of the weights (SPDX id or the vendor's licence name).
        ram_bytes: Both weight files plus both f16 KV caches at ``default_context``.
        vram_bytes: ``ram_bytes`` plus each model's logits buffer at n_ubatch 512 (everything on the GPU).
        notes: Caveats (approximate sizes, gated repos, why the pair qualifies).
        default_context: The context the memory estimate assumes.
    """

    id: str
    name: str
    target: FileSpec
    draft: FileSpec
    context_length: int
    licence: str
    ram_bytes: int
    vram_bytes: int
    notes: str = ""
    default_context: int = 4096


def model_bytes(size: int, arch: Arch, n_ctx: int) -> tuple[int, int]:
    """RAM and VRAM needed to run one model: weights + f16 KV cache (+ its logits buffer for VRAM)."""
    ram = size + arch.kv_bytes(n_ctx)
    return ram, ram + arch.n_vocab * UBATCH * 4


def estimate_bytes(
    target_size: int, draft_size: int, target: Arch, draft: Arch, n_ctx: int
) -> tuple[int, int]:
    """RAM and VRAM needed to run a pair: the sum of :func:`model_bytes` for its two models."""
    t_ram, t_vram = model_bytes(target_size, target, n_ctx)
    d_ram, d_vram = model_bytes(draft_size, draft, n_ctx)
    return t_ram + d_ram, t_vram + d_vram


def catalog_path() -> Path:
    """The catalog file: ``$SSD_CHAT_CATALOG`` if set, else the bundled ``resources/catalog.json``."""
    override = os.environ.get(CATALOG_ENV)
    return Path(override) if override else resources_dir() / "catalog.json"


def _file(d: dict[str, Any]) -> FileSpec:
    return FileSpec(str(d["repo"]), str(d["filename"]), int(d["size"]), d.get("sha256"), str(d["quant"]))


def load_catalog(path: Path | None = None) -> list[PairSpec]:
    """Read the catalog.

    Args:
        path: Catalog file (default: :func:`catalog_path`).

    Returns:
        The pairs in catalog order.

    Raises:
        EngineError: The file is missing or malformed.
    """
    p = path or catalog_path()
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        return [
            PairSpec(
                id=str(e["id"]), name=str(e["name"]), target=_file(e["target"]), draft=_file(e["draft"]),
                context_length=int(e["context_length"]), licence=str(e["licence"]),
                ram_bytes=int(e["ram_bytes"]), vram_bytes=int(e["vram_bytes"]), notes=str(e.get("notes", "")),
                default_context=int(e.get("estimate", {}).get("context", 4096)),
            )
            for e in data["pairs"]
        ]
    except OSError as exc:
        raise EngineError(f"cannot read the model catalog {p}: {exc.strerror}") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise EngineError(f"the model catalog {p} is malformed: {exc!r}") from exc


def get_pair(pair_id: str) -> PairSpec:
    """The catalog pair with this id.

    Raises:
        EngineError: No such pair (the message lists the known ids).
    """
    pairs = load_catalog()
    for spec in pairs:
        if spec.id == pair_id:
            return spec
    raise EngineError(f"unknown pair {pair_id!r}; known pairs: {', '.join(s.id for s in pairs)}")


def format_bytes(n: float) -> str:
    """``1.2 GB``-style sizes (decimal units, as model cards use)."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def fit_label(spec: PairSpec, ram_available: int, vram_available: int | None) -> tuple[str, str]:
    """Whether a pair fits this machine.

    Args:
        spec: The pair.
        ram_available: Free RAM in bytes.
        vram_available: Free GPU memory in bytes, or None when unknown or no GPU.

    Returns:
        ``(label, reason)``: label is ``"fits"``, ``"tight"`` or ``"too large"``; reason is one line.
    """
    return fit_bytes(spec.ram_bytes, spec.vram_bytes, ram_available, vram_available)


def fit_bytes(ram_bytes: int, vram_bytes: int, ram_available: int, vram_available: int | None) -> tuple[str, str]:
    """:func:`fit_label` for any model or pair that needs ``ram_bytes`` on the CPU or ``vram_bytes`` on the GPU."""
    if vram_available is not None and vram_bytes <= vram_available * 0.9:
        return "fits", (
            f"runs on the GPU: needs about {format_bytes(vram_bytes)} of "
            f"{format_bytes(vram_available)} free VRAM"
        )
    need, have = format_bytes(ram_bytes), format_bytes(ram_available)
    if ram_bytes <= ram_available * 0.75:
        return "fits", f"needs about {need} of {have} free RAM"
    if ram_bytes <= ram_available:
        return "tight", f"needs about {need} of {have} free RAM; close other programs first"
    return "too large", f"needs about {need} but only {have} of RAM is free"


class _MemoryStatus(ctypes.Structure):
    _fields_ = [
        ("dwLength", ctypes.c_ulong),
        ("dwMemoryLoad", ctypes.c_ulong),
        ("ullTotalPhys", ctypes.c_ulonglong),
        ("ullAvailPhys", ctypes.c_ulonglong),
        ("ullTotalPageFile", ctypes.c_ulonglong),
        ("ullAvailPageFile", ctypes.c_ulonglong),
        ("ullTotalVirtual", ctypes.c_ulonglong),
        ("ullAvailVirtual", ctypes.c_ulonglong),
        ("ullAvailExtendedVirtual", ctypes.c_ulonglong),
    ]


def _available_ram() -> int:
    if sys.platform == "win32":
        status = _MemoryStatus()
        status.dwLength = ctypes.sizeof(_MemoryStatus)
        ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status))
        return int(status.ullAvailPhys)
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def _available_vram() -> int | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=memory.free", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout
        return max(int(float(v)) for v in out.split()) * 1024 * 1024
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def system_memory() -> tuple[int, int | None]:
    """Available RAM in bytes, and free VRAM of the largest NVIDIA GPU (None when unknown)."""
    return _available_ram(), _available_vram()
