"""ggml's functions that llama-cpp-python does not wrap, looked up in ggml's shared libraries beside llama.cpp's."""

from __future__ import annotations

import ctypes
import logging
import os
import pathlib
import threading
from typing import Any

import llama_cpp as ll

log = logging.getLogger(__name__)

_lock = threading.Lock()
_libs: list[ctypes.CDLL] | None = None


class SymbolError(RuntimeError):
    """A function of ggml this build does not export (a missing library or symbol)."""


def _loaded() -> list[ctypes.CDLL]:
    global _libs
    with _lock:
        if _libs is None:
            from llama_cpp._ctypes_extensions import load_shared_library

            base = getattr(ll.llama_cpp, "_base_path", os.path.join(os.path.dirname(ll.__file__), "lib"))
            folder = pathlib.Path(base)
            libs = []
            for base_name in ("ggml-base", "ggml"):
                try:
                    libs.append(load_shared_library(base_name, folder))
                except (OSError, RuntimeError) as exc:  # a static build: libllama may still export them
                    log.debug("no %s library: %s", base_name, exc)
            libs.append(ll.llama_cpp._lib)
            _libs = libs
        return _libs


def ggml_symbol(symbol: str) -> Any:
    """``symbol`` from ggml's shared libraries beside llama.cpp's (or through libllama's dependencies); raises
    :class:`SymbolError`."""
    for lib in _loaded():
        try:
            return getattr(lib, symbol)
        except AttributeError:
            continue
    raise SymbolError(f"ggml's {symbol} is not exported by this llama.cpp build")
