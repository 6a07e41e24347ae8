"""The CPU-kernel check in the settings dialog: its verdict on this machine and the user's override.

llama.cpp's extra CPU buffer types (AMX tiles, repacked weights) are fast but fault on some CPUs
that advertise AMX; the box calls them "fast CPU code for quantized models" and names AMX only where the CPU has
it (the buffer types and signals are in its tooltip). The engine checks once per
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
    ("Auto: as the test found", "auto"), ("On: always", "on"), ("Off: plain CPU code (slower)", "off"))
TITLE = "Fast CPU code for quantized models"
LABEL = "Fast CPU code"  # in the line above OK that names what a change reloads
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
    """:data:`TITLE`, with "(AMX)" where the CPU has AMX or the check found it faulting."""
    return f"{TITLE} (AMX)" if amx or "AMX" in (status.verdict.dropped if status.verdict else ()) else TITLE


def verdict_text(status: CpuCheckStatus, amx: bool | None = None) -> str:
    """One line in plain words: whether the fast CPU code is used and what the test on this computer found (``amx``:
    the CPU has AMX; None: look). Buffer types, signals and what the test decoded are in :func:`check_detail`."""
    head = title(status, cpu_has_amx() if amx is None else amx)
    verdict = status.verdict
    if verdict is None:
        found = "not tested yet: ssd-chat tests it on this computer when a model first loads"
    elif verdict.dropped:
        names = " and ".join(verdict.dropped)
        unit = "unit" if len(verdict.dropped) == 1 else "units"
        found = (f"this CPU's {names} {unit} failed the test on this computer, so ssd-chat uses the rest of the fast"
                 " code")
    elif verdict.safe:
        found = "tested on this computer: it works"
    else:
        found = "it failed the test on this computer, so ssd-chat uses the plain CPU code (slower)"
    state = "on" if status.allowed else "off"
    if status.allowed and status.dropped:
        state = f"on, without {' and '.join(status.dropped)}"
    if status.override != "auto":
        return f"{head} — {state}, as you chose; {found}"
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
