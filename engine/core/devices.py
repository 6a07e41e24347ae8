"""The devices a model loads onto once this process has remote machines, and each device's share of the layers.

A remote target keeps its output layer at home (this machine's first GPU, else its CPU). A decode then brings back
each row's hidden state (n_embd floats, ~6 KB) in the one round trip its remote graph costs, and the logits are made
and sampled here. A full-vocabulary logits row would be ~608 KB, and llama.cpp's own sampler on the remote device
fetches each row's results separately, which costs two round trips a row.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import llama_cpp as ll

from engine.errors import ParameterError

from .placement import read_size

# llama.cpp gives offloaded slot j of G (slot G-1 is the output layer) to the first device whose running share
# exceeds j: remote shares summing to G - 1.5 and home's 1.5 put exactly the last slot at home, half a slot
# from either boundary so float rounding cannot move it.
HOME_SHARE = 1.5


@dataclass(frozen=True)
class Devices:
    """A NULL-terminated ``ggml_backend_dev_t`` array for ``llama_model_params.devices`` (kept alive while the model
    loads) and how the load uses it."""

    array: ctypes.Array[ctypes.c_void_p]
    remote: tuple[int, ...] = ()  # the remote machines' devices, in the array's order; the home device follows
    home_is_cpu: bool = False  # a remote model's output layer runs on this machine's CPU (no local GPU)

    @property
    def address(self) -> int:
        return ctypes.addressof(self.array)


def device_list(remote: Sequence[str]) -> Devices | None:
    """Explicit devices for a load once this process has remote machines (None: llama.cpp's default list): a remote
    model gets the remote machines' devices and a home device, any other this machine's GPUs (llama.cpp would put
    remote ones first)."""
    if not remote and "engine.native.rpc" not in sys.modules:
        return None
    from engine.native import rpc
    from engine.remote import parse_endpoints, relay

    if not remote:
        return Devices(rpc.device_array(rpc.local_gpus())) if rpc.added() else None
    devs = tuple(d for ep in parse_endpoints(list(remote)) for d in relay.add_server(ep))
    gpus = rpc.local_gpus()
    home = gpus[0] if gpus else next(d for d, kind in rpc.local_devices() if kind == rpc.DEV_CPU)
    return Devices(rpc.device_array([*devs, home]), devs, not gpus)


def check_split(split: Sequence[float], n: int) -> None:
    """A ``--tensor-split`` must give one finite, non-negative share per remote device, not all 0."""
    if len(split) != n:
        shares = f"{len(split)} share{'s' if len(split) != 1 else ''}"
        raise ParameterError(f"--tensor-split gives {shares} for {n} remote device{'s' if n != 1 else ''}")
    if any(not 0 <= s < float("inf") for s in split) or sum(split) <= 0:
        raise ParameterError("--tensor-split shares must be numbers of 0 or more, not all 0")


def offloaded_slots(gpu_layers: int, n_layers: int) -> int:
    """How many of a model's n_layers + 1 slots (its repeating layers, then the output layer) llama.cpp offloads."""
    return n_layers + 1 if gpu_layers < 0 else min(gpu_layers, n_layers + 1)


def shares(devices: Devices, split: Sequence[float], gpu_layers: int, path: Path) -> ctypes.Array[ctypes.c_float]:
    """llama.cpp's tensor_split array for a remote model: the remote devices' shares (``split``, else each one's free
    memory) scaled to all offloaded slots but the last, which goes to the home device."""
    from engine.native import rpc

    if split:
        check_split(split, len(devices.remote))
        weights = [float(s) for s in split]
    else:
        weights = [float(rpc.device_memory(d)[0]) for d in devices.remote]
        if sum(weights) <= 0:  # a device that reports no memory: llama.cpp's own default then is an even split
            weights = [1.0] * len(devices.remote)
    slots = offloaded_slots(gpu_layers, read_size(path).n_layers)
    remote_total = max(slots - HOME_SHARE, 0.0)
    scaled = [w * remote_total / sum(weights) for w in weights]
    return (ctypes.c_float * int(ll.llama_max_devices()))(*scaled, HOME_SHARE)
