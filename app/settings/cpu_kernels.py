"""The CPU-kernel check in the settings dialog: its verdict on this machine and the user's override.

llama.cpp's extra CPU buffer types (AMX tiles, repacked weights) are fast but fault on some CPUs
that advertise AMX; the box names AMX only where the CPU has it. The engine checks once per
llama.cpp build and CPU (``engine.cpu_check``) and, where only AMX faults, keeps the repacked
weights; this box says what it found and lets the user choose Auto / On (all types) / Off (none),
kept by the engine and read at the next model load.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from PySide6.QtWidgets import QComboBox, QLabel, QVBoxLayout, QWidget

from engine import CpuCheckOverride, CpuCheckStatus, cpu_check_status, set_cpu_check_override

CHOICES: tuple[tuple[str, CpuCheckOverride], ...] = (
    ("Auto: as the check found", "auto"), ("On: all of them", "on"), ("Off: plain CPU kernels", "off"))
TITLE = "CPU kernels: repacked weights"
AMX_FLAG = "amx_tile"  # the Linux /proc/cpuinfo flag of a CPU with AMX tiles
CPUINFO = Path("/proc/cpuinfo")


def cpu_has_amx(cpuinfo: Path = CPUINFO) -> bool:
    """Whether this CPU reports AMX tiles (Linux; elsewhere False: the label then leaves AMX out)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(AMX_FLAG in line.split() for line in text.splitlines() if line.startswith("flags"))


def title(status: CpuCheckStatus, amx: bool) -> str:
    """"CPU kernels: repacked weights", with "(AMX)" where the CPU has AMX or the check found it faulting."""
    return f"{TITLE} (AMX)" if amx or "AMX" in (status.verdict.dropped if status.verdict else ()) else TITLE


def verdict_text(status: CpuCheckStatus, amx: bool | None = None) -> str:
    """One line: whether the extra buffer types are used, and what the check's verdict means for the user (``amx``:
    the CPU has AMX; None: look); the signal that killed the check's child is in :func:`check_detail`."""
    head = title(status, cpu_has_amx() if amx is None else amx)
    verdict = status.verdict
    if verdict is None:
        found = "not checked yet: the check runs when a model first loads"
    elif verdict.dropped:
        names = ", ".join(verdict.dropped)
        unit = "unit is" if len(verdict.dropped) == 1 else "units are"
        found = f"this CPU's {names} {unit} not usable here; ssd-chat uses its other fast kernels (repacked weights)"
    elif verdict.safe:
        found = f"the check ran a K-quant model with them ({verdict.detail})"
    else:
        found = "this CPU's extra fast kernels are not usable here; ssd-chat uses the plain CPU kernels (slower)"
    state = "on" if status.allowed else "off"
    if status.allowed and status.dropped:
        state = f"{', '.join(status.dropped)} off, repacked weights on"
    if status.override != "auto":
        return f"{head} — {state}: chosen here; {found}"
    return f"{head} — {state}: {found}"


def check_detail(status: CpuCheckStatus) -> str:
    """What the check's children did, signals included (the verdict line's tooltip, as in the log)."""
    verdict = status.verdict
    if verdict is None:
        return "The check has not run on this llama.cpp build and CPU yet."
    if verdict.dropped:
        names = ", ".join(verdict.dropped)
        return f"The CPU check: with {names} on, its child was {verdict.fault}; without {names}: {verdict.detail}."
    return f"The CPU check: {verdict.detail}."


class CpuKernelsBox(QWidget):
    """The verdict line and an Auto / On / Off choice; :meth:`apply` hands a changed choice to the engine."""

    def __init__(self, status: CpuCheckStatus | None = None, parent: QWidget | None = None, *,
                 amx: bool | None = None) -> None:
        super().__init__(parent)
        self.status = status if status is not None else cpu_check_status()
        self.verdict = QLabel(verdict_text(self.status, amx))
        self.verdict.setObjectName("cpu-kernels-verdict")
        self.verdict.setToolTip(check_detail(self.status))
        self.verdict.setWordWrap(True)
        self.combo = QComboBox()
        for text, value in CHOICES:
            self.combo.addItem(text, value)
        self.combo.setToolTip("Changing this reloads the model pair.")
        self.set_choice(self.status.override)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.verdict)
        layout.addWidget(self.combo)

    def choice(self) -> CpuCheckOverride:
        """"auto", "on" or "off"."""
        return cast(CpuCheckOverride, self.combo.currentData())

    def set_choice(self, value: CpuCheckOverride) -> None:
        """Select "auto", "on" or "off"."""
        self.combo.setCurrentIndex(self.combo.findData(value))

    def apply(self) -> bool:
        """Keep the choice if it changed; True when it did (the pair must be reloaded to use it)."""
        if self.choice() == self.status.override:
            return False
        set_cpu_check_override(self.choice())
        return True
