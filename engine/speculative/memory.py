"""auto's picture of the machine, kept on disk from one start of the app to the next.

The cost model (:class:`~engine.speculative.costmodel.CostModel`) is what auto has measured on this machine with
this pair: verify time by width, draft and tree times, acceptance, cache hits, measured against predicted
per plan, probe gaps. It is worth keeping past the end of a run: the next run then starts on the plan
the last one settled on instead of probing the machine again. One small JSON file per machine and setup
(llama.cpp build and CPU, the two model files, threads and GPU layers), in the user cache folder; a missing,
unreadable or damaged file (bytes, nesting, a figure out of range or not finite) means a fresh model and one log
line, never an error, and a model with such a figure is never written.

What is read back is a prior, not a measurement: every figure is replaced by the first fresh sample of it, and the
per-plan tallies count AGE_WEIGHT of what they held, so a file written while the machine was busy costs a few
rounds, not every later run (:attr:`CostModel.stale` makes auto re-measure ar first).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.core import cpu_check
from engine.core.diskio import atomic_write_text
from engine.core.mode import MODES, Mode
from engine.errors import EngineError

from . import kin
from .costmodel import CostModel
from .figures import Acceptance, Ema, Ratio, Tally, level_figure, lookup_prior, verify_figure
from .knobs import AGE_WEIGHT
from .plan import Plan

log = logging.getLogger(__name__)

VERSION = 11  # 2: catch-up time and next_guess apart (1 kept inflated draft times); 3: pool acceptance by depth too;
# 4: tree levels timed apart from the glue decode (3 kept their average); 5: ssd tallies without the outcome's luck,
# and their hits (4 kept round times that swung with the hits); 6: the draft's token on ssd's split threads apart;
# 7: the verify widths' figures relative to the machine's pace, and the pace; 8: acceptance by draft position
# too, and ssd's verify apart from sd's on every machine (7 mixed them where the cores are not split); 9: the
# tokens between the pool's drafts; 10: what drafting between them delivered; 11: the tokens between them kept as
# a figure with its count

# the cost model's single figures
EMAS = ("pace", "draft_token", "draft_token_split", "catchup_token", "tree_glue", "acceptance", "hit", "top1",
        "next_guess")
MAX_BYTES = 1 << 20  # a larger file is not a kept model (it holds a few hundred figures)
PROBABILITIES = ("acceptance", "hit", "top1", "next_guess")  # figures in [0, 1]; the other single figures: seconds
DIR_ENV = "SSD_CHAT_AUTO_MEMORY_DIR"  # where the files go instead of <cache>/auto (tests, portable installs)


def memory_dir() -> Path:
    override = os.environ.get(DIR_ENV)
    return Path(override) if override else cpu_check.cache_dir() / "auto"


def memory_file(models: Sequence[str | None], setup: str) -> Path:
    """The file for one machine and setup: the model files (None: no draft) and ``setup`` (threads, GPU layers);
    named by its kin key too (:mod:`engine.speculative.kin`)."""
    machine = cpu_check.build_key()
    return memory_dir() / kin.file_name(machine, models, setup, [machine, *(_identity(p) for p in models), setup])


def _identity(path: str | None) -> str:
    """A model file by path, size and time: a replaced file is measured anew."""
    if path is None:
        return "none"
    try:
        st = os.stat(path)
    except OSError:
        return path
    return f"{os.path.abspath(path)}|{st.st_size}|{int(st.st_mtime)}"


def _ema(e: Ema) -> list[Any]:
    return [e.value, e.n]


def _number(x: object, lo: float = 0.0, hi: float = math.inf, *, above: bool = False) -> float:
    """``x`` as a finite float in [lo, hi] (``above``: strictly above lo); ValueError otherwise."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise ValueError(f"{x!r} is not a number")
    v = float(x)
    if not math.isfinite(v) or v < lo or v > hi or (above and v <= lo):
        raise ValueError(f"{x!r} is out of range")
    return v


def _count(x: object) -> int:
    if not isinstance(x, int) or isinstance(x, bool) or x < 0:
        raise ValueError(f"{x!r} is not a count")
    return x


def _set_ema(e: Ema, raw: list[Any], hi: float = math.inf) -> Ema:
    """A figure from disk: a value in (0, hi] (a time or a probability above zero) or None, and its count."""
    if not isinstance(raw, list) or len(raw) != 2:
        raise ValueError(f"{raw!r} is not a figure")
    e.value = None if raw[0] is None else _number(raw[0], 0.0, hi, above=hi == math.inf)
    e.n = _count(raw[1])
    return e


def _plan_key(p: Plan) -> str:
    return f"{p.mode}:{p.k}:{p.budget}"


def _plan(key: str) -> Plan:
    mode, k, budget = key.split(":")
    if mode not in MODES or mode == Mode.AUTO:  # auto picks plans, it is none
        raise ValueError(f"plan {key!r}")
    return Plan(Mode(mode), _width(k), _width(budget))


def dump(m: CostModel) -> dict[str, Any]:
    return {
        "version": VERSION,
        "verify": {str(w): _ema(e) for w, e in m.verify.items()},
        "verify_split": {str(w): _ema(e) for w, e in m.verify_split.items()},
        "level": {str(w): _ema(e) for w, e in m.level.items()},
        **{name: _ema(getattr(m, name)) for name in EMAS},
        "lookup_accept": {f"{o}:{d}": [r.hits, r.seen] for (o, d), r in m.lookup_accept.items()},
        "acceptance_at": [list(pair) for pair in zip(m.acceptance.pos_hits, m.acceptance.pos_trials, strict=True)],
        "tallies": {_plan_key(p): [getattr(t, f) for f in Tally.FIELDS] for p, t in m.tallies.items()},
        "mode_tallies": {mode: [getattr(t, f) for f in Tally.FIELDS] for mode, t in m.mode_tallies.items()},
        "probe_gap": m.probe_gap, "rounds": m.rounds, "last_run": m.last_run, "pool_gap": _ema(m.pool_gap),
        "gap_tally": [getattr(m.gap_tally, f) for f in Tally.FIELDS],
    }


def restore(data: dict[str, Any], split: bool) -> CostModel:
    """A cost model from :func:`dump`'s output (raises KeyError/ValueError/TypeError on a damaged one)."""
    if data.get("version") != VERSION:
        raise ValueError(f"version {data.get('version')!r}, expected {VERSION}")
    m = CostModel(split=split)
    for name in ("verify", "verify_split"):
        table = getattr(m, name)
        for w, raw in data[name].items():
            table[_width(w)] = _set_ema(verify_figure(), raw)
    for w, raw in data["level"].items():
        m.level[_width(w)] = _set_ema(level_figure(), raw)
    for name in EMAS:
        _set_ema(getattr(m, name), data[name], 1.0 if name in PROBABILITIES else math.inf)
    for key, pair in data["lookup_accept"].items():
        order, depth = (_width(x) for x in key.split(":"))
        hits, seen = (_number(x) for x in pair)
        if hits > seen:
            raise ValueError(f"pool acceptance {hits}/{seen}")
        r = m.lookup_accept.setdefault((order, depth), Ratio(lookup_prior(order)))  # as learn_lookup makes it
        r.hits, r.seen = hits, seen
    _set_positions(m.acceptance, data["acceptance_at"])
    for key, vals in data["tallies"].items():
        m.tallies[_plan(key)] = _tally(vals)
    for mode, vals in data["mode_tallies"].items():
        m.mode_tallies[str(mode)] = _tally(vals)
    m.probe_gap = {str(k): max(1, _count(v)) for k, v in data["probe_gap"].items()}
    m.rounds = _count(data["rounds"])
    m.last_run = {str(k): _count(v) for k, v in data["last_run"].items()}
    _set_ema(m.pool_gap, data["pool_gap"])
    m.gap_tally = _tally(data["gap_tally"])
    return m


def _set_positions(a: Acceptance, raw: list[Any]) -> None:
    """Acceptance by draft position from disk: (hits, trials) per position."""
    if not isinstance(raw, list) or len(raw) != len(a.pos_trials):
        raise ValueError(f"{raw!r} is not acceptance by position")
    for i, pair in enumerate(raw):
        hits, trials = (_number(x) for x in pair)
        if hits > trials:
            raise ValueError(f"acceptance at {i}: {hits}/{trials}")
        a.pos_hits[i], a.pos_trials[i] = hits, trials


def _width(x: str) -> int:
    w = int(x)
    if not 0 <= w <= 4096:
        raise ValueError(f"width {x!r}")
    return w


def age(m: CostModel) -> CostModel:
    """Figures read back become priors: each is replaced by its first fresh sample (the pace folded into the verify
    figures), and the tallies count AGE_WEIGHT of their rounds; the model is marked stale (auto re-measures ar)."""
    pace = m.pace.get(1.0)
    for table in (m.verify, m.verify_split):
        for e in table.values():
            e.value = None if e.value is None else e.value * pace
    m.pace.value = 1.0
    for e in (*m.verify.values(), *m.verify_split.values(), *m.level.values(),
              *(getattr(m, name) for name in EMAS if name != "pace" and name not in PROBABILITIES)):
        if e.value is not None:  # a time (probabilities are learnt from many rounds: one draw says little)
            e.n, e.warm = 0, True  # the next sample weighs 1/1: it replaces the value
    for t in (*m.tallies.values(), *m.mode_tallies.values(), m.gap_tally):
        for name in Tally.FIELDS[1:]:
            setattr(t, name, AGE_WEIGHT * getattr(t, name))
    m.stale = True
    return m


def _tally(vals: list[Any]) -> Tally:
    t = Tally()
    for name, v in zip(Tally.FIELDS, vals, strict=True):  # a tally of another length raises ValueError
        setattr(t, name, _count(v) if name == "n" else _number(v))
    return t


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a figure")


def load(path: Path | None, split: bool) -> CostModel:
    """The kept model (aged: :func:`age`); where ``path`` has none, the one kept under the name versions before the
    kin key gave it, else the nearest kin's (:func:`kin.adopt`); else a fresh one (``path`` None: none is kept), as
    where the file cannot be read (logged)."""
    if path is None:
        return CostModel(split=split)
    old = kin.legacy(path)
    m = _read(path, split) or (_read(old, split) if old is not None else None)
    if m is not None:
        return m
    near = kin.nearest(path)
    m = _read(near[0], split) if near is not None else None
    if near is None or m is None:
        return CostModel(split=split)
    log.info("auto starts from %s: the same pair in another quantization (sizes %s x)", near[0].name,
             ", ".join(f"{r:.2f}" for r in near[1]))
    return kin.adopt(m, near[1])


def _read(path: Path, split: bool) -> CostModel | None:
    """The model kept at ``path``, aged; None where there is no such file, a fresh one where it cannot be read."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("auto starts afresh: cannot read %s: %s", path, exc)
        return CostModel(split=split)
    try:
        if len(raw) > MAX_BYTES:
            raise ValueError(f"over {MAX_BYTES} bytes")
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)  # NaN, Infinity: damage
        if not isinstance(data, dict):
            raise ValueError("not an object")
        return age(restore(data, split))
    except (KeyError, ValueError, TypeError, AttributeError, RecursionError, OverflowError) as exc:
        # (UnicodeDecodeError and json's errors are ValueErrors; deep nesting raises RecursionError)
        log.warning("auto starts afresh: %s is damaged (%s)", path, str(exc)[:200])
        return CostModel(split=split)


def save(model: CostModel, path: Path) -> None:
    """Keep the model (atomically) if every figure is in range (checked as :func:`load` will read it); a folder
    that cannot be written only costs the next run its head start."""
    try:
        data = dump(model)
        restore(data, model.split)
        text = json.dumps(data, allow_nan=False)
    except (KeyError, ValueError, TypeError) as exc:
        log.warning("auto's measurements are not kept: a figure is out of range (%s)", exc)
        return
    try:  # a temporary file of its own, renamed into place: two processes may save the same file at once
        atomic_write_text(path, text, "auto's measurements")
    except EngineError as exc:
        log.warning("could not keep auto's measurements: %s", exc)
