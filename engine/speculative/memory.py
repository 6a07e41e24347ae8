"""auto's picture of the machine, kept on disk from one start of the app to the next.

The cost model (:class:`~engine.speculative.costmodel.CostModel`) is what auto has measured on this machine with
this pair: verify time by width, draft and tree times, acceptance, cache hits, measured against predicted
per plan, probe gaps. It is worth keeping past the end of a run: the next run then starts on the plan
the last one settled on instead of probing the machine again. One small JSON file per machine and setup
(llama.cpp build and CPU, the two model files, threads and GPU layers), in the user cache folder; a missing
or unreadable file means a fresh model, never an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.core import cpu_check

from .costmodel import CostModel, Ema, Plan, Ratio, Tally, level_figure, lookup_prior, verify_figure

log = logging.getLogger(__name__)

VERSION = 7  # 2: catch-up time and next_guess apart (1 kept inflated draft times); 3: pool acceptance by depth too;
# 4: tree levels timed apart from the glue decode (3 kept their average); 5: ssd tallies without the outcome's luck,
# and their hits (4 kept round times that swung with the hits); 6: the draft's token on ssd's split threads apart;
# 7: the verify widths' figures relative to the machine's pace, and the pace

# the cost model's single figures
EMAS = ("pace", "draft_token", "draft_token_split", "catchup_token", "tree_glue", "acceptance", "hit", "top1",
        "next_guess")
DIR_ENV = "SSD_CHAT_AUTO_MEMORY_DIR"  # where the files go instead of <cache>/auto (tests, portable installs)


def memory_dir() -> Path:
    override = os.environ.get(DIR_ENV)
    return Path(override) if override else cpu_check.cache_dir() / "auto"


def memory_file(models: Sequence[str | None], setup: str) -> Path:
    """The file for one machine and setup: the model files (None: no draft) and ``setup`` (threads, GPU layers)."""
    key = "|".join([cpu_check.build_key(), *(_identity(p) for p in models), setup])
    return memory_dir() / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


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


def _set_ema(e: Ema, raw: list[Any]) -> Ema:
    e.value = None if raw[0] is None else float(raw[0])
    e.n = int(raw[1])
    return e


def _plan_key(p: Plan) -> str:
    return f"{p.mode}:{p.k}:{p.budget}"


def _plan(key: str) -> Plan:
    mode, k, budget = key.split(":")
    return Plan(mode, int(k), int(budget))


def dump(m: CostModel) -> dict[str, Any]:
    return {
        "version": VERSION,
        "verify": {str(w): _ema(e) for w, e in m.verify.items()},
        "verify_split": {str(w): _ema(e) for w, e in m.verify_split.items()},
        "level": {str(w): _ema(e) for w, e in m.level.items()},
        **{name: _ema(getattr(m, name)) for name in EMAS},
        "lookup_accept": {f"{o}:{d}": [r.hits, r.seen] for (o, d), r in m.lookup_accept.items()},
        "tallies": {_plan_key(p): [getattr(t, f) for f in Tally.FIELDS] for p, t in m.tallies.items()},
        "mode_tallies": {mode: [getattr(t, f) for f in Tally.FIELDS] for mode, t in m.mode_tallies.items()},
        "probe_gap": m.probe_gap, "rounds": m.rounds, "last_run": m.last_run,
    }


def restore(data: dict[str, Any], split: bool) -> CostModel:
    """A cost model from :func:`dump`'s output (raises KeyError/ValueError/TypeError on a damaged one)."""
    if data.get("version") != VERSION:
        raise ValueError(f"version {data.get('version')!r}, expected {VERSION}")
    m = CostModel(split=split)
    for name in ("verify", "verify_split"):
        table = getattr(m, name)
        for w, raw in data[name].items():
            table[int(w)] = _set_ema(verify_figure(), raw)
    for w, raw in data["level"].items():
        m.level[int(w)] = _set_ema(level_figure(), raw)
    for name in EMAS:
        _set_ema(getattr(m, name), data[name])
    for key, (hits, seen) in data["lookup_accept"].items():
        order, depth = (int(x) for x in key.split(":"))
        r = m.lookup_accept.setdefault((order, depth), Ratio(lookup_prior(order)))  # as learn_lookup makes it
        r.hits, r.seen = float(hits), float(seen)
    for key, vals in data["tallies"].items():
        m.tallies[_plan(key)] = _tally(vals)
    for mode, vals in data["mode_tallies"].items():
        m.mode_tallies[str(mode)] = _tally(vals)
    m.probe_gap = {str(k): int(v) for k, v in data["probe_gap"].items()}
    m.rounds = int(data["rounds"])
    m.last_run = {str(k): int(v) for k, v in data["last_run"].items()}
    return m


def _tally(vals: list[Any]) -> Tally:
    t = Tally()
    for name, v in zip(Tally.FIELDS, vals, strict=True):  # a tally of another length raises ValueError
        setattr(t, name, int(v) if name == "n" else float(v))
    return t


def load(path: Path, split: bool) -> CostModel:
    """The kept model, or a fresh one when there is none or it cannot be read (logged)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return CostModel(split=split)
    except OSError as exc:
        log.warning("auto starts afresh: cannot read %s: %s", path, exc)
        return CostModel(split=split)
    try:
        return restore(json.loads(text), split)
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        log.warning("auto starts afresh: %s is damaged (%s)", path, exc)
        return CostModel(split=split)


def save(model: CostModel, path: Path) -> None:
    """Keep the model (atomically); a folder that cannot be written only costs the next run its head start."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dump(model)), encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        log.warning("could not keep auto's measurements in %s: %s", path, exc)
