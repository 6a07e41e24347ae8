"""Where the models' layers run: GPU layers chosen from the device's free memory, and what was chosen, in words.

``auto`` (the default) puts every layer of the target, then of the draft, on the GPU when they fit in
the device's free memory with their KV caches and compute buffers; otherwise the most target layers
that fit, and the draft on what is left. A number is used as given. A build that cannot offload
(llama.cpp's CPU build) runs both models on the CPU whatever is asked. Sizes come from the GGUF
header (:mod:`gguf`), free memory from ggml's device list through :func:`probe_device` (the seam a
test replaces by passing a :class:`Device`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ModelLoadError

from .gguffile import check_gguf_file
from .mode import DRAFTING
from .options import ALL_LAYERS, AUTO_LAYERS, MAX_BRANCHES, MAX_K

log = logging.getLogger(__name__)

HEADROOM = 0.05  # share of free device memory left free: other programs and the allocator's fragmentation
KV_BYTES = 2  # bytes per KV element: the engine's caches are F16
BATCH = 512  # tokens of the largest batch the engine decodes (its compute buffer scales with it)
COMPUTE_FIXED = 64 << 20  # compute-buffer bytes besides the batch's rows: graph scratch, norms
DRAFT_EXTRA = MAX_K * (MAX_BRANCHES + 1) + 16  # the draft context's cells beyond n_ctx (the engine's tree room)


@dataclass(frozen=True, slots=True)
class Device:
    """What placement needs of the machine: whether this build can offload, and the GPU memory free now."""

    offload: bool
    free_bytes: int = 0


def probe_device() -> Device:
    """This build and machine: llama.cpp's offload support and the free memory of its GPUs (integrated ones
    where there is no discrete GPU), summed as llama.cpp splits layers over them. Remote machines' devices
    (llama.cpp's RPC, typed GPU whatever they are) are not this machine's: they are placed by :func:`place_layers`."""
    from engine.native import rpc
    from engine.native.offload import supports_gpu_offload
    from engine.native.symbols import SymbolError

    if not supports_gpu_offload():
        return Device(False)
    try:
        gpus = rpc.local_gpus()
        return Device(True, sum(rpc.device_memory(d)[0] for d in gpus))
    except SymbolError as exc:
        log.warning("cannot read the GPU's free memory (%s): auto places no layer", exc)
        return Device(True)


@dataclass(frozen=True, slots=True)
class ModelSize:
    """One model's GPU cost, from its GGUF header: bytes a repeating layer and its KV cell take, and the rest."""

    n_layers: int
    layer_bytes: int  # weights of one repeating layer (the mean)
    head_bytes: int  # the output layer (and its norm), offloaded with the last layer
    kv_bytes_per_token: int  # one token's K and V in one layer
    compute_bytes: int  # the compute buffer of one batch

    def bytes_for(self, layers: int, n_ctx: int) -> int:
        """GPU bytes with ``layers`` repeating layers offloaded (all of them: the output layer too)."""
        if layers <= 0:
            return 0
        head = self.head_bytes if layers >= self.n_layers else 0
        return layers * (self.layer_bytes + self.kv_bytes_per_token * n_ctx) + head + self.compute_bytes

    def layers_within(self, budget: int, n_ctx: int) -> int:
        """The most layers whose bytes fit in ``budget``."""
        if self.bytes_for(self.n_layers, n_ctx) <= budget:
            return self.n_layers
        per_layer = self.layer_bytes + self.kv_bytes_per_token * n_ctx
        room = budget - self.compute_bytes
        return max(0, min(self.n_layers - 1, room // per_layer)) if per_layer > 0 and room > 0 else 0


def read_size(path: str | os.PathLike[str]) -> ModelSize:
    """A GGUF model's :class:`ModelSize`, from its header (the tensors are not read)."""
    from gguf import GGUFReader

    check_gguf_file(Path(path))  # a missing or non-GGUF file is said as a load would say it
    try:
        reader = GGUFReader(os.fspath(path))
    except (ValueError, OSError, KeyError, IndexError) as exc:  # a truncated or damaged header
        raise ModelLoadError(f"could not load the model (its GGUF header does not read: {exc}): {path}") from None

    def value(key: str, default: int = 0) -> int:
        field = reader.fields.get(key)
        if field is None:
            return default
        got = field.contents()
        return int(max(got)) if isinstance(got, list) else int(got)  # per-layer arrays: the widest layer

    arch_field = reader.fields.get("general.architecture")
    arch = str(arch_field.contents()) if arch_field is not None else "llama"
    sizes = {t.name: int(t.n_bytes) for t in reader.tensors}
    n_layers = value(f"{arch}.block_count", 1)
    blocks = sum(n for name, n in sizes.items() if name.startswith("blk."))
    head = sum(n for name, n in sizes.items() if name.startswith("output"))
    if "output.weight" not in sizes:  # tied embeddings: llama.cpp puts a copy of token_embd at the output
        head += sizes.get("token_embd.weight", 0)
    n_embd, n_head = value(f"{arch}.embedding_length"), value(f"{arch}.attention.head_count", 1)
    kv_heads = value(f"{arch}.attention.head_count_kv", n_head)
    k_len = value(f"{arch}.attention.key_length", n_embd // max(n_head, 1))
    v_len = value(f"{arch}.attention.value_length", k_len)
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    n_vocab = value(f"{arch}.vocab_size") or (len(tokens.data) if tokens is not None else 0)
    compute = BATCH * (n_vocab + 8 * n_embd) * 4 + COMPUTE_FIXED  # the batch's logits and activations, F32
    return ModelSize(n_layers, blocks // max(n_layers, 1), head, kv_heads * (k_len + v_len) * KV_BYTES, compute)


_UNSIZED = ModelSize(0, 0, 0, 0, 0)  # a model whose header a CPU build need not read


@dataclass(frozen=True, slots=True)
class Placement:
    """The GPU layers chosen for the target and the draft (as llama.cpp takes them: -1 = all), and why."""

    target_layers: int
    draft_layers: int
    target_total: int  # the models' repeating layers (0: not known)
    draft_total: int
    gpu_build: bool
    has_draft: bool
    free_bytes: int | None = None  # the device's free memory, where auto placed the layers
    remote: tuple[str, ...] = ()  # HOST:PORT of the remote machines that hold the target's offloaded layers

    def on_gpu(self, layers: int, total: int) -> int:
        """How many of ``total`` layers run on the GPU with ``layers`` asked."""
        if not self.gpu_build or layers == 0:
            return 0
        return total if layers < 0 or layers >= total else layers

    @property
    def target_on_gpu(self) -> int:
        return self.on_gpu(self.target_layers, self.target_total)

    @property
    def draft_on_gpu(self) -> int:
        return self.on_gpu(self.draft_layers, self.draft_total) if self.has_draft else 0

    @property
    def text(self) -> str:
        """What runs where, in one line: "target 28/28 layers on the GPU, draft on the GPU"."""
        if not self.gpu_build:
            return "CPU build: both models on the CPU" if self.has_draft else "CPU build: the model on the CPU"
        parts = [_where("target", self.target_on_gpu, self.target_total, whole=False, where=self._target_device)]
        if self.has_draft:
            parts.append(_where("draft", self.draft_on_gpu, self.draft_total, whole=True))
        text = ", ".join(parts)
        short = self.target_on_gpu < self.target_total or (self.has_draft and self.draft_on_gpu < self.draft_total)
        if self.free_bytes is not None and short:
            memory = f"{', '.join(self.remote)}'s" if self.remote else "GPU"
            text += f" (auto: {self.free_bytes / 2**30:.1f} GiB of {memory} memory free)"
        return text

    @property
    def _target_device(self) -> str:
        return f"remote {', '.join(self.remote)}" if self.remote else "the GPU"

    @property
    def memory_key(self) -> str:
        """What the planner's memory of this machine is keyed by, besides the files: where the layers run."""
        key = f"GPU layers {self.target_on_gpu} {self.draft_on_gpu}"
        return key + (f", remote {','.join(self.remote)}" if self.remote else "")


def _where(name: str, on: int, total: int, *, whole: bool, where: str = "the GPU") -> str:
    if on == 0:
        return f"{name} on the CPU"
    if whole and on >= total:
        return f"{name} on {where}"
    return f"{name} {on}/{total} layers on {where}"


def plan_layers(target: ModelSize, draft: ModelSize | None, gpu_layers: int, draft_gpu_layers: int, n_ctx: int,
                device: Device) -> Placement:
    """The placement for two models of known sizes on ``device`` (pure: no file, no llama.cpp)."""
    d_total = draft.n_layers if draft is not None else 0
    if not device.offload:
        t = 0 if gpu_layers == AUTO_LAYERS else gpu_layers
        d = 0 if draft_gpu_layers == AUTO_LAYERS else draft_gpu_layers
        return Placement(t, d, target.n_layers, d_total, False, draft is not None)
    budget = int(device.free_bytes * (1.0 - HEADROOM))
    auto = AUTO_LAYERS in (gpu_layers, draft_gpu_layers)
    t = gpu_layers
    if t == AUTO_LAYERS:
        t = target.layers_within(budget, n_ctx)
        t = ALL_LAYERS if t == target.n_layers else t
    budget -= target.bytes_for(target.n_layers if t < 0 else min(t, target.n_layers), n_ctx)
    d = draft_gpu_layers
    if draft is not None and d == AUTO_LAYERS:
        d = draft.layers_within(max(budget, 0), n_ctx + DRAFT_EXTRA)
        d = ALL_LAYERS if d == draft.n_layers else d
    d = 0 if d == AUTO_LAYERS else d
    return Placement(t, d, target.n_layers, d_total, True, draft is not None, device.free_bytes if auto else None)


def place_layers(target_path: str | os.PathLike[str], draft_path: str | os.PathLike[str] | None, gpu_layers: int,
                 draft_gpu_layers: int, n_ctx: int, device: Device | None = None,
                 remote: Sequence[str] = ()) -> Placement:
    """The GPU layers for the target and the draft at ``target_path`` / ``draft_path`` (see :func:`plan_layers`);
    ``device`` defaults to this machine's (:func:`probe_device`). With ``remote`` machines the target's layers go
    to their devices (auto: as many as their free memory holds, each asked first) and the draft stays here."""
    device = probe_device() if device is None else device
    if remote:
        return _place_remote(target_path, draft_path, gpu_layers, draft_gpu_layers, n_ctx, device, remote)
    if not device.offload:  # nothing to size: the layers stay on the CPU whatever their size
        return plan_layers(_UNSIZED, _UNSIZED if draft_path else None, gpu_layers, draft_gpu_layers, n_ctx, device)
    target = read_size(Path(target_path))
    draft = read_size(Path(draft_path)) if draft_path else None
    placement = plan_layers(target, draft, gpu_layers, draft_gpu_layers, n_ctx, device)
    log.info("GPU layers: %s", placement.text)
    return placement


def _place_remote(target_path: str | os.PathLike[str], draft_path: str | os.PathLike[str] | None, gpu_layers: int,
                  draft_gpu_layers: int, n_ctx: int, device: Device, remote: Sequence[str]) -> Placement:
    from engine.native import rpc
    from engine.remote import parse_endpoints, probe

    rpc.require()  # a build without RPC says so (and how to rebuild) before any machine is asked
    eps = parse_endpoints(list(remote))
    free = sum(probe(ep).free_bytes for ep in eps)  # an unreachable or busy machine is said here, before any load
    target = read_size(Path(target_path))
    t = plan_layers(target, None, gpu_layers, 0, n_ctx, Device(True, free)).target_layers
    d_total, d = 0, 0
    if draft_path and device.offload:
        draft = read_size(Path(draft_path))
        d_total = draft.n_layers
        # the target's output layer and its logits stay here, on the GPU the draft would use (engine.core.devices)
        home = Device(True, max(device.free_bytes - target.head_bytes - target.compute_bytes, 0))
        d = plan_layers(draft, None, draft_gpu_layers, 0, n_ctx + DRAFT_EXTRA, home).target_layers
    auto = gpu_layers == AUTO_LAYERS
    placement = Placement(t, d, target.n_layers, d_total, True, draft_path is not None, free if auto else None,
                          tuple(str(ep) for ep in eps))
    log.info("layers: %s", placement.text)
    return placement


def cannot_pay(mode: str, placement: Placement, draft_token_s: float, target_step_s: float) -> str | None:
    """A warning where a fixed drafting mode cannot pay by construction, else None: the draft runs on the CPU,
    the target on the GPU, and a draft token takes at least as long as a whole target step (so every drafted
    token costs more than the step it could save)."""
    if mode not in DRAFTING or target_step_s <= 0 or draft_token_s < target_step_s:
        return None
    if placement.target_on_gpu == 0 or placement.draft_on_gpu > 0:
        return None
    return (f"{mode} cannot pay here: the draft runs on the CPU at {1000 * draft_token_s:.1f} ms a token, slower "
            f"than the target's whole step on the GPU ({1000 * target_step_s:.1f} ms); mode auto picks what pays")
