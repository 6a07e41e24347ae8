"""Convert a GGUF to F16 with llama.cpp's quantize API (cached in the model store)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import llama_cpp as ll

from engine.core.gguffile import check_gguf_file
from engine.core.paths import model_store_dir
from engine.errors import ModelLoadError
from engine.native.startup import init_backend


def ensure_f16(src: Path, dest_dir: Path | None = None) -> Path:
    """The F16 (dequantized) copy of ``src``, made once and reused."""
    check_gguf_file(src)
    folder = dest_dir or model_store_dir() / "converted"
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{src.stem}-f16.gguf"
    stamp = out.with_name(out.name + ".src")
    key = f"{src.resolve()} {src.stat().st_size} {src.stat().st_mtime_ns}"
    if out.is_file() and stamp.is_file() and stamp.read_text() == key:
        return out
    init_backend()
    params = ll.llama_model_quantize_default_params()
    params.ftype = ll.LLAMA_FTYPE_MOSTLY_F16
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    tmp = out.with_name(out.name + ".tmp")
    rc = ll.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params))
    if rc != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        raise ModelLoadError(f"llama.cpp could not convert {src} to F16 (code {rc})")
    os.replace(tmp, out)
    stamp.write_text(key)
    return out
