"""Whether this build of llama.cpp can put layers on a GPU of this machine: llama.cpp's answer, less the GPUs that
are other machines' (RPC devices)."""

from __future__ import annotations

import llama_cpp as ll

from . import rpc
from .startup import init_backend


def supports_gpu_offload() -> bool:
    """Whether a GPU of this machine can take layers (llama.cpp's own answer is also yes for a build with RPC, whose
    devices are other machines', GPU or not)."""
    init_backend()
    if not ll.llama_supports_gpu_offload():
        return False
    return not rpc.available() or bool(rpc.local_gpus())
