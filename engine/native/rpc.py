"""llama.cpp's RPC backend through ctypes: whether this build has it, servers added, devices for a model load.

llama-cpp-python wraps none of ``ggml_backend_rpc_*`` or ``ggml_backend_dev_*``; the functions come from
ggml's libraries (:func:`.symbols.ggml_symbol`) and the RPC ones through the backend registry
(``ggml_backend_reg_get_proc_address`` on the "RPC" registry), which works whether ggml-rpc is a library
of its own or linked in. A build without RPC has no "RPC" registry.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable
from typing import Any

from engine.errors import EngineError

from .startup import init_backend
from .symbols import SymbolError, ggml_symbol

log = logging.getLogger(__name__)

REBUILD = ('CMAKE_ARGS="-DGGML_RPC=ON" pip install --no-cache-dir --force-reinstall --no-binary llama-cpp-python '
           'llama-cpp-python==0.3.36')
NO_RPC = f"this llama.cpp build has no RPC backend; rebuild it with: {REBUILD}"
DEV_CPU, DEV_GPU, DEV_IGPU = 0, 1, 2  # enum ggml_backend_dev_type

_lock = threading.Lock()
_servers: dict[str, tuple[int, ...]] = {}  # remote machines added in this process -> their device pointers
_fns: dict[str, Any] = {}


class RpcUnavailable(EngineError):
    """This build of llama.cpp was made without ``-DGGML_RPC=ON``."""


def _fn(name: str, restype: Any, *argtypes: Any) -> Any:
    if name not in _fns:
        f = ggml_symbol(name)
        f.restype, f.argtypes = restype, list(argtypes)
        _fns[name] = f
    return _fns[name]


def _rpc_reg() -> int | None:
    init_backend()
    try:
        by_name = _fn("ggml_backend_reg_by_name", ctypes.c_void_p, ctypes.c_char_p)
    except SymbolError:
        return None
    reg = by_name(b"RPC")
    return int(reg) if reg else None


def available() -> bool:
    """Whether this llama.cpp build has the RPC backend."""
    return _rpc_reg() is not None


def require() -> int:
    """The RPC registry; :class:`RpcUnavailable` (naming the rebuild command) where the build has none."""
    reg = _rpc_reg()
    if reg is None:
        raise RpcUnavailable(NO_RPC)
    return reg


def rpc_function(name: str, restype: Any, *argtypes: Any) -> Any:
    """One of ggml-rpc's exported functions, from the RPC registry."""
    get = _fn("ggml_backend_reg_get_proc_address", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)
    addr = get(require(), name.encode())
    if not addr:
        raise RpcUnavailable(f"this llama.cpp's RPC backend has no {name}; rebuild it with: {REBUILD}")
    return ctypes.CFUNCTYPE(restype, *argtypes)(addr)


def device_name(dev: int) -> str:
    raw = _fn("ggml_backend_dev_name", ctypes.c_char_p, ctypes.c_void_p)(dev)
    return (raw or b"?").decode("utf-8", "replace")


def device_memory(dev: int) -> tuple[int, int]:
    """(free, total) bytes of a device."""
    f = _fn("ggml_backend_dev_memory", None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t),
            ctypes.POINTER(ctypes.c_size_t))
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    f(dev, ctypes.byref(free), ctypes.byref(total))
    return int(free.value), int(total.value)


def local_devices() -> list[tuple[int, int]]:
    """(device pointer, type) of every device of this machine in ggml's list (RPC devices left out)."""
    count = _fn("ggml_backend_dev_count", ctypes.c_size_t)
    get = _fn("ggml_backend_dev_get", ctypes.c_void_p, ctypes.c_size_t)
    kind = _fn("ggml_backend_dev_type", ctypes.c_int, ctypes.c_void_p)
    reg_of = _fn("ggml_backend_dev_backend_reg", ctypes.c_void_p, ctypes.c_void_p)
    rpc = _rpc_reg()
    out = []
    for i in range(int(count())):
        dev = get(i)
        if dev and (rpc is None or reg_of(dev) != rpc):
            out.append((int(dev), int(kind(dev))))
    return out


def local_gpus() -> list[int]:
    """This machine's GPUs (integrated ones where there is no discrete GPU): what llama.cpp offloads to locally."""
    devs = local_devices()
    gpus = [d for d, t in devs if t == DEV_GPU]
    return gpus or [d for d, t in devs if t == DEV_IGPU]


def add_server(endpoint: str, route: Callable[[], str]) -> tuple[int, ...]:
    """Connect llama.cpp to the remote machine ``endpoint`` at the address ``route()`` gives (called only for a
    machine not yet added: it may probe the machine first, since llama.cpp aborts the process where it cannot connect
    and hangs while the server is busy) and return its devices; one already added is not connected again."""
    with _lock:
        if endpoint in _servers:
            return _servers[endpoint]
        add = rpc_function("ggml_backend_rpc_add_server", ctypes.c_void_p, ctypes.c_char_p)
        reg = add(route().encode())
        if not reg:
            raise EngineError(f"llama.cpp could not add remote machine {endpoint}")
        n = _fn("ggml_backend_reg_dev_count", ctypes.c_size_t, ctypes.c_void_p)(reg)
        dev_get = _fn("ggml_backend_reg_dev_get", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
        devs = tuple(int(dev_get(reg, i)) for i in range(int(n)))
        if not devs:
            raise EngineError(f"remote machine {endpoint} offers no device")
        _servers[endpoint] = devs
        log.info("remote machine %s: %s", endpoint, ", ".join(device_name(d) for d in devs))
        return devs


def added() -> tuple[str, ...]:
    """The remote machines (``HOST:PORT``) this process's llama.cpp is connected to."""
    with _lock:
        return tuple(_servers)


def device_array(devices: list[int]) -> ctypes.Array[ctypes.c_void_p]:
    """A NULL-terminated ``ggml_backend_dev_t`` array for ``llama_model_params.devices`` (keep it alive while
    the model loads; 0.3.36 types the field as a bare pointer, so it takes the array's address)."""
    arr = (ctypes.c_void_p * (len(devices) + 1))(*devices, None)
    return arr
