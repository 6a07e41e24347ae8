"""Whether llama.cpp's extra CPU buffer types (AMX tiles, repacked weights) are safe on this machine: the verdict.

Some virtual machines advertise Intel AMX but fault on tile instructions: llama.cpp then dies by SIGILL
or SIGSEGV in ``ggml_backend_amx_mul_mat`` as soon as a K-quant model decodes a batch. No Python code can
catch that, so the check runs once per llama.cpp build and CPU in a child process (the probe,
:mod:`engine.process.cpu_probe`): it quantizes a tiny model to Q4_K_M, loads it with the extra buffer types
on and decodes through the engine's own ``Model``/``Context`` path. If a signal kills it while the list
holds types besides CPU_REPACK (AMX), a second child drops all but CPU_REPACK (:mod:`engine.native.bufts`);
if that one decodes, models load without the dropped types only. If it faults too, models load with
``use_extra_bufts = False`` (llama.cpp tools' ``--no-repack``): the plain CPU kernels. The verdict is kept
in the user cache folder, keyed by build, CPU and probe version; the user may override it (on = all types,
off = none; data folder).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal, cast

import llama_cpp as ll
import platformdirs

from engine.errors import EngineError

from .diskio import atomic_write_text
from .paths import APP_NAME, user_data_dir

log = logging.getLogger(__name__)

Override = Literal["auto", "on", "off"]
OVERRIDES: tuple[Override, ...] = ("auto", "on", "off")

# A signal the probe's child raises before decoding (tests): "SIGILL", or "SIGSEGV:AMX" to raise it only
# while the AMX buffer type is still in llama.cpp's list.
FAULT_ENV = "SSD_CHAT_CPU_CHECK_FAULT"
CHILD_ENV = "SSD_CHAT_CPU_CHECK_CHILD"  # set inside the child: the buffer types it drops, comma-separated
CACHE_ENV = "SSD_CHAT_CACHE_DIR"  # where verdicts are kept (tests, portable installs)
PROBE_VERSION = 2  # part of the build key: 2 added the second child without AMX

_lock = threading.Lock()
_memo: dict[str, Verdict] = {}
# The probe: runs the check's children for a build key, and says whether their verdict is conclusive. It loads models
# in child processes, so it lives above this module (engine.process.cpu_probe), which hands it here on import.
_probe: list[Callable[[str], tuple[Verdict, bool]]] = []


def use_probe(probe: Callable[[str], tuple[Verdict, bool]]) -> None:
    """The probe :func:`check` runs where no verdict is known (engine.process.cpu_probe gives it)."""
    _probe[:] = [probe]


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of one probe on one llama.cpp build and CPU."""

    safe: bool
    detail: str  # what the child did: "decoded 8+2 tokens" or "killed by SIGILL: Fatal Python error: ..."
    key: str
    checked_at: str
    dropped: tuple[str, ...] = ()  # buffer types models load without (safe verdicts only), e.g. ("AMX",)
    fault: str = ""  # how the first child died when ``dropped`` is set: "killed by SIGILL: ..."


@dataclass(frozen=True, slots=True)
class Status:
    """What the settings dialog shows: the verdict (None until probed), the override and the result."""

    verdict: Verdict | None
    override: Override
    allowed: bool
    dropped: tuple[str, ...] = ()  # the extra buffer types models load without while ``allowed``


def cache_dir() -> Path:
    override = os.environ.get(CACHE_ENV)
    return Path(override) if override else Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def verdict_file() -> Path:
    return cache_dir() / "cpu-check.json"


def override_file() -> Path:
    return user_data_dir() / "cpu-kernels.json"


def cpu_name() -> str:
    """The CPU's model name and feature flags (Linux), or what :mod:`platform` knows."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return " ".join(fields.get(k, "").strip() for k in ("model name", "flags", "Features"))


def build_key() -> str:
    """Identifies the llama.cpp build and the CPU: a new build or another CPU is probed anew."""
    system_info = (ll.llama_print_system_info() or b"").decode("utf-8", "replace")
    raw = f"{ll.__version__}|{system_info}|{cpu_name()}|probe {PROBE_VERSION}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def read_override() -> Override:
    try:
        value = json.loads(override_file().read_text(encoding="utf-8")).get("extra_bufts", "auto")
    except (OSError, ValueError, AttributeError):
        return "auto"
    return cast(Override, value) if value in OVERRIDES else "auto"


def set_override(value: Override) -> None:
    """Keep the user's choice; it applies to models loaded from now on."""
    if value not in OVERRIDES:
        raise ValueError(f"override must be one of {', '.join(OVERRIDES)}, not {value!r}")
    path = override_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"extra_bufts": value}), encoding="utf-8")


def _read_verdicts() -> dict[str, dict[str, object]]:
    try:
        data = json.loads(verdict_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def remembered(key: str) -> Verdict | None:
    """The verdict kept for ``key``, if any (in-process first, then the cache file)."""
    if key in _memo:
        return _memo[key]
    entry = _read_verdicts().get(key)
    if not isinstance(entry, dict):
        return None
    try:
        dropped = entry.get("dropped", [])
        verdict = Verdict(bool(entry["safe"]), str(entry["detail"]), key, str(entry["checked_at"]),
                          tuple(str(name) for name in dropped) if isinstance(dropped, list) else (),
                          str(entry.get("fault", "")))
    except KeyError:
        return None
    _memo[key] = verdict
    return verdict


def remember(verdict: Verdict) -> None:
    """Keep ``verdict`` for this process and in the cache file (written whole: two processes may probe at once)."""
    _memo[verdict.key] = verdict
    data = _read_verdicts()
    data[verdict.key] = {k: v for k, v in asdict(verdict).items() if k != "key"}
    try:
        atomic_write_text(verdict_file(), json.dumps(data, indent=1), "the CPU check's verdict")
    except EngineError as exc:  # a read-only cache only costs a probe per process
        log.warning("could not remember the CPU check: %s", exc)


def status() -> Status:
    """The current verdict (without probing), the user's override and whether extra buffers are used."""
    override = read_override()
    verdict = remembered(build_key())
    if override != "auto":
        return Status(verdict, override, override == "on")
    if verdict is None:
        return Status(None, override, True)
    return Status(verdict, override, verdict.safe, verdict.dropped if verdict.safe else ())


def extra_bufts_plan() -> tuple[bool, tuple[str, ...]]:
    """Whether models should load with llama.cpp's extra CPU buffer types, and which of them to drop
    first; probes once if unknown."""
    if CHILD_ENV in os.environ:
        return True, tuple(name for name in os.environ[CHILD_ENV].split(",") if name)
    override = read_override()
    if override != "auto":
        return override == "on", ()
    verdict = check()
    return verdict.safe, verdict.dropped if verdict.safe else ()


def check(*, recheck: bool = False) -> Verdict:
    """The remembered verdict for this build and CPU, or a new probe's (``recheck`` forces one)."""
    key = build_key()
    with _lock:
        known = None if recheck else remembered(key)
        if known is not None:
            return known
        if not _probe:
            raise RuntimeError("the CPU check has no probe: engine.process.cpu_probe was never imported")
        verdict, conclusive = _probe[0](key)
        if verdict.dropped:  # the user's meaning first; the signal stays in the line for the log and docs
            names = ", ".join(verdict.dropped)
            log.warning("CPU check: this CPU's %s unit is not usable here; ssd-chat uses its other fast kernels "
                        "(repacked weights). With %s on, the check's child was %s; without it: %s",
                        names, names, verdict.fault, verdict.detail)
        elif verdict.safe:
            log.info("CPU check: llama.cpp's extra CPU buffer types run on this CPU (%s)", verdict.detail)
        else:
            log.warning("CPU check: this CPU's extra fast kernels are not usable here; ssd-chat uses the plain CPU "
                        "kernels: slower, never a crash. The check's child was %s", verdict.detail)
        if conclusive:  # else the verdict holds for this process only: the next one probes again
            remember(verdict)
        return verdict
