"""The target's verify time by batch width: the machine's pace times each width's own figure.

The pace follows the machine within two or three verifies (PACE_ALPHA); a width's figure, at pace 1, over about
twenty (FIGURE_ALPHA): a slow spell seen by the widths that run moves the widths that do not with them. A pace
that lasts past a spell is handed over to the figure of the width that ran (:meth:`VerifyTimes._hand_over`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from .figures import Ema, verify_figure
from .knobs import (
    PACE_AFTER,
    PACE_ALPHA,
    PACE_BAND,
    PACE_HANDOVER,
    SHIFT_BAND,
    SPELL_VERIFIES,
    SPLIT_VERIFY_COST,
    TIMING_ALPHA,
    TIMING_CLIP,
    VERIFY_PRIOR,
    VERIFY_SLOPE_PRIOR,
)


@dataclass
class VerifyTimes:
    """Verify seconds by width: plain (``verify``), and ssd's (``verify_split``)."""

    pace: Ema = field(default_factory=lambda: Ema(PACE_ALPHA, init=1.0, clip=TIMING_CLIP))
    verify: dict[int, Ema] = field(default_factory=dict)  # by width (verify_figure)
    # ... the same for ssd's rounds: beside the tree the draft builds (a device the two share), on its split threads
    # where the machine splits its cores
    verify_split: dict[int, Ema] = field(default_factory=dict)
    split: bool = False  # ssd rounds run with split threads
    # t_verify by (width, split) and the measured widths by table, kept until add_verify
    _verify_at: dict[tuple[int, bool], float] = field(default_factory=dict, repr=False, compare=False)
    # the widths read off by (table, only those measured since the memory was read), kept until add_verify
    _known: dict[tuple[bool, bool], list[tuple[int, float]]] = field(default_factory=dict, repr=False, compare=False)
    _away: int = field(default=0, repr=False, compare=False)  # verifies the pace has stayed on one side of PACE_BAND
    _side: int = field(default=0, repr=False, compare=False)  # ... and which: 1 slow, -1 fast, 0 within the band
    # Spells whose mean pace lay beyond SHIFT_BAND (the machine changed: another program started or stopped); not
    # kept on disk
    shifts: int = field(default=0, repr=False, compare=False)
    _spell: float = field(default=0.0, repr=False, compare=False)  # the sum of the paces since the pace left the band
    # Seconds a verify's graph build adds (a batch shape new to the target's context: over RPC, round trips), and the
    # widths the context has run (any other builds its graph first). Neither is kept on disk: a context is a process's.
    build: Ema = field(default_factory=lambda: Ema(TIMING_ALPHA))
    built: set[int] = field(default_factory=set, repr=False, compare=False)
    # the seconds of each figure (width, split) that is one build's verify: the width's next verify replaces it
    _builds: dict[tuple[int, bool], float] = field(default_factory=dict, repr=False, compare=False)

    def add_verify(self, width: int, seconds: float, split: bool = False, build: bool = False) -> None:
        """One verify of ``width`` tokens: a width with a figure of PACE_AFTER samples moves the pace first (the
        pace it implies: its seconds over the figure), then the width's figure learns the seconds at that pace, and
        takes over a share of a pace that has lasted past a spell (:meth:`_hand_over`). ``build``: the verify built
        its graph first (a batch shape new to the context; over RPC, round trips): it stands in for a width without a
        figure until the width's next verify (the two teach :attr:`build`), less a build's cost past noise."""
        table = self.verify_split if split else self.verify
        e = table.get(width)
        self.built.add(width)
        if build and e is not None and e.value is not None:  # a figure read back from disk: the build's cost
            self._learn_build(seconds - self.t_verify(width, split))
            return
        built_s = self._builds.pop((width, split), None)
        if built_s is not None and not build:  # the width's first verify since its build: the figure starts anew
            del table[width]
            e = None
        elif build:
            self._builds[(width, split)] = seconds
        if e is None:  # ssd's first verify of a width is clipped against what sd's widths predict for it
            e = table[width] = verify_figure(self._estimate_verify(width, split) if split and self.verify else None)
        new_width = e.n == 0
        if e.value and e.n >= PACE_AFTER:
            self.pace.add(seconds / e.value)
        e.add(seconds / self.pace.get(1.0))
        self._hand_over(e)
        if built_s is not None and not build:
            self._learn_build(built_s - seconds)
        elif build:
            self._learn_build(None)
        self._verify_at.clear()  # the split table's estimate may derive from the other one
        # widths read back and not measured since are read off the measured ones: they move with them
        read_back = any(f.n == 0 and f.value is not None for f in table.values())
        for fresh in (False, True):
            known = self._known.get((split, fresh))
            if new_width or known is None or e.n == PACE_AFTER or (read_back and not fresh):  # PACE_AFTER: the
                self._known.pop((split, fresh), None)  # width may now join the trusted ones
            else:  # the same widths: only this one's figure moves (a round's usual case)
                i = bisect.bisect_left(known, (width,))
                if i < len(known) and known[i][0] == width:
                    known[i] = (width, e.get(0.0))  # (measured since the memory was read: n > 0)

    @property
    def remote(self) -> bool:
        """Whether a verify has built its graph over a link (only a remote target's builds are reported)."""
        return bool(self._builds) or self.build.value is not None

    def build_cost(self) -> float:
        """Seconds a verify's graph build adds, as measured (0 before any: a CPU's build costs next to nothing)."""
        return max(0.0, self.build.get(0.0))

    def build_for(self, width: int) -> float:
        """Seconds a verify of ``width`` adds first: a build where the context has not run the width, else none."""
        return 0.0 if width in self.built else self.build_cost()

    def _learn_build(self, extra: float | None) -> None:
        """One build's ``extra`` seconds (None: none measured this time); then each figure that is still a build's
        verify is that verify less the build's cost, where the cost takes more than TIMING_CLIP's noise off it."""
        if extra is not None:
            self.build.add(extra)
        cost, pace = self.build_cost(), self.pace.get(1.0)
        for (width, split), seconds in self._builds.items():
            if seconds > TIMING_CLIP * (seconds - cost) > 0:
                (self.verify_split if split else self.verify)[width].value = (seconds - cost) / pace
                self._known.clear()

    def _hand_over(self, figure: Ema) -> None:
        """Once the pace has stayed away from 1 past a spell, move PACE_HANDOVER of its distance into ``figure``
        (the width that ran), their product kept."""
        pace = self.pace.get(1.0)
        side = 0 if abs(pace - 1.0) <= PACE_BAND else (1 if pace > 1.0 else -1)
        self._away = self._away + 1 if side and side == self._side else int(bool(side))
        self._side = side
        self._spell = self._spell + pace if self._away > 1 else pace  # the paces of the verifies away so far
        mean = self._spell / self._away if self._away else 1.0  # beyond the band either way, as a ratio of speeds
        self.shifts += self._away == SPELL_VERIFIES + 1 and not 1 / (1 + SHIFT_BAND) <= mean <= 1 + SHIFT_BAND
        if self._away <= SPELL_VERIFIES or figure.value is None:
            return
        kept = 1.0 + (1.0 - PACE_HANDOVER) * (pace - 1.0)
        figure.value *= pace / kept
        self.pace.value = kept

    def t_verify(self, width: int, split: bool = False) -> float:
        """Seconds a verify of ``width`` tokens takes now (at the machine's pace)."""
        t = self._verify_at.get((width, split))
        if t is None:
            t = self._verify_at[(width, split)] = self._estimate_verify(width, split) * self.pace.get(1.0)
        return t

    def _known_verify(self, split: bool, fresh: bool = False) -> list[tuple[int, float]]:
        """(width, seconds) of the measured widths that other widths are read off, narrowest first: those of
        PACE_AFTER samples once two widths have that many (a lone stalled sample of a width that then never runs
        again would set the slope of every wider one), else every measured width; ``fresh``: only widths
        measured since the memory was read."""
        known = self._known.get((split, fresh))
        if known is None:
            table = self.verify_split if split else self.verify
            measured = [(w, e) for w, e in table.items() if e.value is not None and (e.n or not fresh)]
            # a graph build's verify only where no width is measured without one
            measured = [(w, e) for w, e in measured if (w, split) not in self._builds] or measured
            settled = [(w, e) for w, e in measured if e.n >= PACE_AFTER]
            trusted = settled if len(settled) >= 2 else measured
            # a width read back from disk at what it is trusted to take (:meth:`_estimate_verify`)
            known = self._known[(split, fresh)] = sorted((w, e.get(0.0) if e.n else self._estimate_verify(w, split))
                                                         for w, e in trusted)
        return known

    def _estimate_verify(self, width: int, split: bool) -> float:
        e = (self.verify_split if split else self.verify).get(width)
        if (width, split) in self._builds:  # a build's verify: read off two or more widths measured without one
            known = self._known_verify(split)
            if len(known) >= 2 and (known[0][0], split) not in self._builds:
                return self._read_off(width, split, known)
        if e is not None and e.value is not None:  # measured
            fresh = [] if e.n else self._known_verify(split, fresh=True)
            if not fresh:
                return e.value
            # read back from disk and not measured since: never slower than the widths measured since imply (a
            # busy hour's figure of a width no plan then runs would keep every plan that needs it from running)
            return min(e.value, self._read_off(width, split, fresh))
        return self._read_off(width, split, self._known_verify(split))

    def _read_off(self, width: int, split: bool, known: list[tuple[int, float]]) -> float:
        """A width's seconds read off the ``known`` ones (none: the prior)."""
        if split:  # ssd's: the all-core figure, scaled as at the nearest width measured for ssd
            if not known:
                return (SPLIT_VERIFY_COST if self.split else 1.0) * self._estimate_verify(width, False)
            w0, t0 = min(known, key=lambda wt: abs(wt[0] - width))
            return t0 * self._estimate_verify(width, False) / self._estimate_verify(w0, False)
        if not known:
            return VERIFY_PRIOR * (1 + VERIFY_SLOPE_PRIOR * (width - 1))
        if len(known) == 1:
            w0, t0 = known[0]
            slope = VERIFY_SLOPE_PRIOR
            return t0 * (1 + slope * (width - w0)) if width > w0 else t0 / (1 + slope * (w0 - width))
        i = bisect.bisect_left(known, (width,))  # the first measured width above this one (it is not measured)
        lo, hi = known[max(i - 1, 0)], known[min(i, len(known) - 1)]
        if lo[0] == hi[0]:  # outside the measured widths: the slope over all of them, never falling
            (w0, t0), (w1, t1) = known[0], known[-1]
            slope = max(0.0, (t1 - t0) / (w1 - w0))
            return max(1e-6, t1 + slope * (width - w1)) if width > w1 else max(1e-6, t0 - slope * (w0 - width))
        return lo[1] + (hi[1] - lo[1]) * (width - lo[0]) / (hi[0] - lo[0])
