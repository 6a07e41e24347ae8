"""llama.cpp's extra CPU buffer types (AMX, CPU_REPACK): list them by name and choose which ones loads use.

llama.cpp asks the CPU backend for its extra buffer types through the proc address
``ggml_backend_dev_get_extra_bufts``, which returns a static, NULL-terminated array owned by ggml-cpu,
and walks it at every model load. Rewriting that array in-process (the kept entries shifted down,
NULL after them) before a load keeps llama.cpp from placing any tensor in a dropped type. The first
touch snapshots the array, so a later call can bring dropped types back (the user's "on").
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Iterable
from typing import Any

from .symbols import SymbolError, ggml_symbol

log = logging.getLogger(__name__)

REPACK = "CPU_REPACK"
_DEVICE_CPU = 0  # GGML_BACKEND_DEVICE_TYPE_CPU

_vp = ctypes.c_void_p
_GetExtraBufts = ctypes.CFUNCTYPE(ctypes.POINTER(_vp), _vp)


class BuftError(RuntimeError):
    """The extra buffer types cannot be reached in this build (a missing library or symbol)."""


class _Table:
    """The CPU backend's extra-buffer-type array, its original entries and their names."""

    def __init__(self) -> None:
        base, ggml = _function("ggml_backend_dev_backend_reg"), _function("ggml_backend_dev_by_type")
        proc, name = _function("ggml_backend_reg_get_proc_address"), _function("ggml_backend_buft_name")
        ggml.restype, ggml.argtypes = _vp, [ctypes.c_int]
        base.restype, base.argtypes = _vp, [_vp]
        proc.restype, proc.argtypes = _vp, [_vp, ctypes.c_char_p]
        name.restype, name.argtypes = ctypes.c_char_p, [_vp]
        dev = ggml(_DEVICE_CPU)
        reg = base(dev) if dev else None
        fn = proc(reg, b"ggml_backend_dev_get_extra_bufts") if reg else None
        if not fn:
            raise BuftError("llama.cpp's CPU backend offers no extra buffer types here")
        self.array = _GetExtraBufts(fn)(dev)
        if not self.array:
            raise BuftError("llama.cpp's CPU backend returned no extra buffer type list")
        self.original: list[int] = []
        while self.array[len(self.original)]:
            self.original.append(int(self.array[len(self.original)]))
        self.names = {p: bytes(name(p) or b"?").decode("utf-8", "replace") for p in self.original}

    def current(self) -> tuple[str, ...]:
        out: list[str] = []
        while self.array[len(out)]:
            out.append(self.names.get(int(self.array[len(out)]), "?"))
        return tuple(out)

    def keep(self, drop: frozenset[str]) -> None:
        kept = [p for p in self.original if self.names[p] not in drop]
        for i in range(len(self.original)):
            self.array[i] = kept[i] if i < len(kept) else None


_lock = threading.Lock()
_table: _Table | None = None


def _function(symbol: str) -> Any:
    try:
        return ggml_symbol(symbol)
    except SymbolError as exc:
        raise BuftError(str(exc)) from None


def _get() -> _Table:
    global _table
    if _table is None:
        _table = _Table()
    return _table


def available() -> tuple[str, ...]:
    """The extra buffer types this build offers on this CPU, in llama.cpp's order; raises :class:`BuftError`."""
    with _lock:
        table = _get()
        return tuple(table.names[p] for p in table.original)


def in_use() -> tuple[str, ...]:
    """The extra buffer types model loads use now (``available()`` less the dropped ones)."""
    with _lock:
        return _get().current()


def use_all_but(drop: Iterable[str]) -> tuple[str, ...] | None:
    """Let model loads from now on use every extra buffer type except those named in ``drop`` (idempotent;
    an empty ``drop`` brings all back). Returns the types now in use, or None when ``drop`` is empty and
    nothing was ever dropped (the list is not even looked up); raises :class:`BuftError`."""
    wanted = frozenset(drop)
    with _lock:
        if not wanted and _table is None:
            return None
        table = _get()
        dropped = {table.names[p] for p in table.original} - set(table.current())
        if dropped != wanted & set(table.names.values()):
            table.keep(wanted)
            log.info("llama.cpp's extra CPU buffer types now in use: %s", ", ".join(table.current()) or "none")
        return table.current()
