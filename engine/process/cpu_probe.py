"""The CPU check's probe: a tiny K-quant decode in a child process (the verdict it gives is kept by
:mod:`engine.core.cpu_check`).

The child quantizes a tiny model to Q4_K_M, loads it with llama.cpp's extra buffer types on and decodes
through the engine's own ``Model``/``Context`` path; a signal that kills it is the CPU's fault. A child is
started, and its end put in words, as the engine's own process is (:mod:`.faults`). Importing this module
hands :func:`probe` to the check.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import os
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import llama_cpp as ll

from engine.core import cpu_check
from engine.core.cpu_check import CHILD_ENV, FAULT_ENV, Verdict
from engine.native import bufts

from . import faults

PROBE_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class _Outcome:
    """How one probe child ended, and the extra buffer types it found before dropping any."""

    end: Literal["decoded", "failed", "killed", "timed out"]
    detail: str
    bufts: tuple[str, ...]


def probe(key: str) -> tuple[Verdict, bool]:
    """Run the tiny K-quant decode in a child process (and, if it faults, once more without all but
    CPU_REPACK), judge how they ended, and say whether that is conclusive: a child that timed out or
    failed with a Python error (say, an import broken mid-edit) proves nothing about the CPU."""
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    first = _run_child(())
    if first.end != "killed":  # a Python error in the child is no CPU fault: keep the fast kernels
        return Verdict(first.end != "timed out", first.detail, key, now), first.end == "decoded"
    drop = tuple(name for name in first.bufts if name != bufts.REPACK)
    if not drop or bufts.REPACK not in first.bufts:
        return Verdict(False, first.detail, key, now), True
    second = _run_child(drop)
    if second.end == "decoded":
        return Verdict(True, second.detail, key, now, drop, first.detail), True
    detail = f"{first.detail}; without {', '.join(drop)}: {second.detail}"
    return Verdict(False, detail, key, now), second.end == "killed"


def _run_child(drop: tuple[str, ...]) -> _Outcome:
    with tempfile.TemporaryDirectory(prefix="ssd-chat-cpu-check-") as tmp:
        folder = Path(tmp)
        child = faults.spawn_context().Process(target=_child, args=(str(folder), drop), daemon=True)
        child.start()
        child.join(PROBE_TIMEOUT_S)
        listed = folder / "bufts.txt"
        found = tuple(listed.read_text(encoding="utf-8").split()) if listed.exists() else ()
        if child.is_alive():
            child.kill()
            child.join()
            return _Outcome("timed out", f"timed out after {PROBE_TIMEOUT_S:.0f} s", found)
        code = child.exitcode if child.exitcode is not None else 1
        stderr = _fault_line(folder / "stderr.txt")
        if code < 0:
            return _Outcome("killed", f"killed by {faults.signal_name(code)}" + (f": {stderr}" if stderr else ""),
                            found)
        if code != 0:
            return _Outcome("failed", f"probe failed without a fault (exit {code}): {stderr}", found)
        return _Outcome("decoded", (folder / "result.txt").read_text(encoding="utf-8"), found)


def _fault_line(path: Path) -> str:
    """faulthandler's "Fatal Python error: ..." line from the child's stderr, else its last line."""
    return faults.fault_line(faults.read_tail(path))


def write_kquant_model(folder: Path) -> Path:
    """A tiny Q4_K_M llama model (rows of 256, as K-quants need; the tests' 4k SPM vocabulary), quantized by
    llama.cpp itself."""
    from engine.tiny.models import write_model

    f32 = write_model(folder / "cpu-check-f32.gguf", n_layer=1, n_embd=256, n_head=4, n_ff=512)
    out = folder / "cpu-check-q4_k_m.gguf"
    qp = ll.llama_model_quantize_default_params()
    qp.ftype = ll.LLAMA_FTYPE_MOSTLY_Q4_K_M
    qp.nthread = 1
    if ll.llama_model_quantize(str(f32).encode(), str(out).encode(), ctypes.byref(qp)) != 0:
        raise RuntimeError("llama.cpp could not quantize the check model")
    return out


def _child(folder_name: str, drop: tuple[str, ...]) -> None:  # pragma: no cover - runs in the probe's child
    folder = Path(folder_name)
    os.environ[CHILD_ENV] = ",".join(drop)  # Model drops these before loading
    faults.redirect_stderr(folder / "stderr.txt")  # faulthandler's "Fatal Python error: Illegal instruction" lands here
    from engine.core.backend import Model
    from engine.core.context import Context, ContextParams
    from engine.native.startup import init_backend

    init_backend()
    with contextlib.suppress(bufts.BuftError):
        (folder / "bufts.txt").write_text("\n".join(bufts.available()), encoding="utf-8")
    path = write_kquant_model(folder)
    with Model(path) as model, Context(model, ContextParams(n_ctx=256, n_batch=32, n_threads=2,
                                                            n_threads_batch=2)) as ctx:
        sig, _, only_with = os.environ.get(FAULT_ENV, "").partition(":")
        if sig and (not only_with or only_with in _in_use()):
            signal.raise_signal(signal.Signals[sig])
        prompt = [model.bos, *range(3, 10)]
        ctx.decode(prompt, list(range(len(prompt))), outputs=list(range(len(prompt))))
        for i in range(2):
            ctx.decode([3 + i], [len(prompt) + i])
    (folder / "result.txt").write_text(f"decoded a batch of {len(prompt)} and 2 single tokens with "
                                       "Q4_K_M weights", encoding="utf-8")


def _in_use() -> tuple[str, ...]:  # pragma: no cover - runs in the probe's child process
    try:
        return bufts.in_use()
    except bufts.BuftError:
        return ()


cpu_check.use_probe(probe)
