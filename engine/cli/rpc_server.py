"""``python -m engine rpc-server``: llama.cpp's own RPC server (``ggml_backend_rpc_start_server``) serving this
machine's devices to another machine's engine. No protocol of ours: any llama.cpp client of protocol 7 can use it.

The server has no authentication and no encryption: whoever reaches the port can run graphs on the devices
and read what is sent. Bound to a loopback address it is reachable through an SSH tunnel only; any other
address prints a warning first. It serves one client at a time and runs until Ctrl+C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading

from engine.core.cpu_check import cache_dir
from engine.core.options import cpu_cores
from engine.errors import EngineError, ParameterError
from engine.native import rpc
from engine.remote.endpoints import DEFAULT_PORT, Endpoint, parse_endpoint

WARNING = ("WARNING: the RPC server on {ep} has no authentication and no encryption: anyone who can reach this "
           "port can run code on this machine's devices and read the model and the conversation. Serve only on a "
           "trusted network, or bind 127.0.0.1 and reach it through an SSH tunnel (docs/remote.md).")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from .help import HelpFormatter

    p = sub.add_parser("rpc-server", formatter_class=HelpFormatter,
                       help="serve this machine's devices to another machine's engine (llama.cpp RPC)",
                       description="Serve this machine's devices (GPUs, else the CPU) with llama.cpp's RPC server, "
                                   "so an engine elsewhere can run its target model's layers here (--rpc HOST:PORT "
                                   "there). One client at a time; no authentication: see docs/remote.md.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every network; prints a "
                   "warning: reach a loopback-bound server through an SSH tunnel instead)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="TCP port")
    p.add_argument("--threads", type=int, default=0, help="CPU threads of a CPU device (0 = all cores)")
    p.add_argument("--device", action="append", default=[], metavar="NAME",
                   help="a device to serve, by llama.cpp's name (CPU, CUDA0, Vulkan0, …; repeat or comma-separate; "
                        "default: every GPU, else the CPU)")
    p.add_argument("--cache", action="store_true", help="keep large tensors in a cache folder here, so a client that "
                   "loads the same model again sends less")
    p.set_defaults(func=cmd_rpc_server)


def _devices(names: list[str]) -> list[int]:
    devs = rpc.local_devices()
    by_name = {rpc.device_name(d).lower(): d for d, _ in devs}
    if not names:
        gpus = rpc.local_gpus()
        return gpus or [d for d, t in devs if t == rpc.DEV_CPU][:1]
    wanted = [n.strip() for item in names for n in item.split(",") if n.strip()]
    missing = [n for n in wanted if n.lower() not in by_name]
    if missing:
        have = ", ".join(rpc.device_name(d) for d, _ in devs)
        raise ParameterError(f"no device named {', '.join(missing)} here; this machine has: {have}")
    return [by_name[n.lower()] for n in wanted]


def _check_port(ep: Endpoint) -> None:
    """Bind once first: llama.cpp's server says only "Failed to create server socket" when it cannot."""
    try:
        family = socket.AF_INET6 if ":" in ep.host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((ep.host, ep.port))
    except OSError as exc:
        why = exc.strerror or exc
        raise EngineError(f"cannot listen on {ep} ({why}): serve on another port with --port N") from None


def cmd_rpc_server(args: argparse.Namespace) -> int:
    if not 1 <= args.port <= 65535:
        raise ParameterError("--port must be a number from 1 to 65535")
    if args.threads < 0:
        raise ParameterError("--threads must be 0 (all cores) or more")
    ep = parse_endpoint(f"[{args.host}]:{args.port}" if ":" in args.host else f"{args.host}:{args.port}")
    start = rpc.rpc_function("ggml_backend_rpc_start_server", None, ctypes.c_char_p, ctypes.c_char_p,
                                ctypes.c_size_t, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p))
    devices = _devices(args.device)
    _check_port(ep)
    if not ep.loopback:
        print(WARNING.format(ep=ep), file=sys.stderr, flush=True)
    cache = None
    if args.cache:
        folder = cache_dir() / "rpc"
        folder.mkdir(parents=True, exist_ok=True)
        cache = os.fsencode(folder)
    arr = (ctypes.c_void_p * len(devices))(*devices)
    threads = args.threads or cpu_cores()
    stopped, failed = threading.Event(), threading.Event()

    def serve() -> None:  # blocks in C for good (ctypes lets the GIL go); returns only on a failure
        start(str(ep).encode(), cache, threads, len(devices), arr)
        failed.set()
        stopped.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    names = ", ".join(rpc.device_name(d) for d in devices)
    print(f"serving {names} on {ep} for one client at a time; Ctrl+C stops", file=sys.stderr, flush=True)
    threading.Thread(target=serve, name="rpc-server", daemon=True).start()
    with contextlib.suppress(KeyboardInterrupt):
        while not stopped.wait(0.5):
            pass
    if failed.is_set():
        print(f"error: llama.cpp's RPC server on {ep} stopped (its own lines above say why)", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(2 if failed.is_set() else 0)  # the server thread is inside llama.cpp for good: end without joining
