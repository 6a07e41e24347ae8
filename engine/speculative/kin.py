"""The planner memory's kin: the file kept for the same pair on this machine in another quantization or an older copy.

A memory file is named by its kin key (the machine, the setup and each model's name without its quantization), its
exact key (each file's path, size and time) and the files' sizes. A pair with no file of its own starts from the
kin file nearest in size instead of from nothing: its timings scaled by the sizes (a decode reads every weight, so
its time follows the file's size), its tallies aged once more, and every figure a prior the first sample replaces
(:func:`engine.speculative.memory.age`). A replaced model file (another download, the same name) is kin too, so what
was learnt decays instead of being reset.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path

from .costmodel import CostModel
from .figures import Tally
from .knobs import AGE_WEIGHT

# The nearest kin is reused only within this size ratio for each model: F16 against Q4_K_M of one model is 3.1x
# (a quantization apart that the first samples correct); further, the figures say more of another machine than of this.
KIN_SIZE_RATIO = 4.0
# A quantization tag ends a GGUF's name: Q4_K_M, IQ3_XS, Q8_0, F16, BF16, ...; a split file's part number after it
_QUANT = re.compile(r"[-_.](?:i?q\d\w*|[bf]f?16|f32|fp16)$", re.IGNORECASE)
_PART = re.compile(r"-\d{5}-of-\d{5}$")
_SECONDS = ("seconds", "pred_seconds")  # a tally's round times (the rest: tokens and hits)
_NAME = re.compile(r"^([0-9a-f]{8})-([0-9a-f]{16})-(\d+(?:-\d+)*)\.json$")


def _digest(parts: Sequence[str], n: int) -> str:
    key = "|".join(parts)
    # surrogatepass: a path the OS gave as bytes that are not UTF-8 (surrogate-escaped) still names one file
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:n]


def stem(path: str | None) -> str:
    """A model file's name without its folder, extension, part number or quantization (None: no draft)."""
    if path is None:
        return "none"
    name = os.path.basename(path).lower().removesuffix(".gguf")
    return _QUANT.sub("", _PART.sub("", name))


def size(path: str | None) -> int:
    """A model file's size in bytes (0: no draft, or a file that cannot be read)."""
    try:
        return os.stat(path).st_size if path is not None else 0
    except OSError:
        return 0


def file_name(machine: str, models: Sequence[str | None], setup: str, exact: Sequence[str]) -> str:
    """The memory file's name: kin key, exact key (the digest of ``exact``), the models' sizes."""
    kin = _digest([machine, *(stem(p) for p in models), setup], 8)
    sizes = "-".join(str(size(p)) for p in models)
    return f"{kin}-{_digest(exact, 16)}-{sizes}.json"


def legacy(path: Path) -> Path | None:
    """Where memory versions before the kin key kept ``path``'s model: the exact key alone."""
    m = _NAME.match(path.name)
    return path.with_name(f"{m.group(2)}.json") if m else None


def nearest(path: Path) -> tuple[Path, list[float]] | None:
    """The kin file nearest ``path``'s models in size (each within KIN_SIZE_RATIO), and the ratio of each of
    ``path``'s sizes to its (1 where either is unknown); None where there is none."""
    m = _NAME.match(path.name)
    if m is None:
        return None
    own = [int(s) for s in m.group(3).split("-")]
    best: tuple[float, Path, list[float]] | None = None
    for other in path.parent.glob(f"{m.group(1)}-*.json"):
        o = _NAME.match(other.name)
        theirs = [int(s) for s in o.group(3).split("-")] if o else []
        if other == path or len(theirs) != len(own):
            continue
        ratios = [a / b if a and b else 1.0 for a, b in zip(own, theirs, strict=True)]
        far = max(abs(math.log(r)) for r in ratios)
        if far <= math.log(KIN_SIZE_RATIO) and (best is None or far < best[0]):
            best = (far, other, ratios)
    return None if best is None else (best[1], best[2])


def adopt(m: CostModel, ratios: Sequence[float]) -> CostModel:
    """A kin's model (read back and aged) for this pair: the target's verify times scaled by its size ratio, the
    draft's times by the draft's, the tallies aged once more (their round times scaled as the target's: what a
    mode delivered caps what its untried plans are trusted with), and each mode's probe gap back to the first (a
    mode that lost there may win here)."""
    target, draft = [*ratios, 1.0, 1.0][:2]
    for e in (*m.verify.values(), *m.verify_split.values()):
        e.value = None if e.value is None else e.value * target
    for e in (m.draft_token, m.draft_token_split, m.catchup_token, m.tree_glue, *m.level.values()):
        e.value = None if e.value is None else e.value * draft
    for t in (*m.tallies.values(), *m.mode_tallies.values(), m.gap_tally):
        for name in Tally.FIELDS[1:]:
            setattr(t, name, AGE_WEIGHT * getattr(t, name) * (target if name in _SECONDS else 1.0))
    m.probe_gap.clear()
    m.stale = True
    return m
