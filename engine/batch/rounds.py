"""Shared rounds: the next token of every reply running beside others, made in decodes shared between them.

Each reply asks from its own thread; the first to ask gathers the others' asks (until every reply in shared
rounds has asked, or :data:`GATHER_S` has passed) and makes the round: every reply gathered gets its next token.
A round is decoded in pieces of sequences with consecutive ids (:func:`pieces`), one decode each: llama.cpp splits a
batch over separate KV streams wherever the ids are not consecutive (rows of sequences 0, 1 and 3 cost a decode of
two rows and one of one), so a piece is what it would decode anyway, and no reply waits a second round for its
token. On the CPU a piece takes at most :data:`EXACT_ROWS` rows, which llama.cpp computes as it computes a single
token, so a greedy reply is the one it makes alone.
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass, field

from engine.speculative.target import Target
from engine.speculative.types import Draft, Verdict

from .slots import Slots

# How long the first ask waits for the other replies' asks: longer than a reply's work between two rounds (a
# token handed to its reader), far shorter than a decode.
GATHER_S = 0.02
# llama.cpp's repacked CPU kernels (Q4_K and the other repacked types) take a batch of 4 rows or more through a
# matrix kernel that sums in another order than the one-row kernel: up to 3 rows, each row is the single token's.
EXACT_ROWS = 3
NO_DRAFT = Draft([], None)


@dataclass(slots=True)
class _Ask:
    target: Target
    verdict: Verdict | None = None
    error: BaseException | None = None
    seconds: float = 0.0  # the shared decode's time
    done: bool = field(default=False)


def pieces(seqs: list[int], width: int) -> list[list[int]]:
    """``seqs`` in runs of consecutive ids, each cut into pieces of at most ``width``: the decodes of one round."""
    out: list[list[int]] = []
    for seq in sorted(seqs):
        if out and out[-1][-1] == seq - 1 and len(out[-1]) < width:
            out[-1].append(seq)
        else:
            out.append([seq])
    return out


class SharedRounds:
    """Plain rounds of several replies, in decodes shared between them (see the module's text)."""

    def __init__(self, slots: Slots, threads: int, *, exact: bool) -> None:
        """``exact``: keep every decode within :data:`EXACT_ROWS` rows (a CPU target)."""
        self._slots = slots
        self._width = EXACT_ROWS if exact else slots.size
        self._threads = threads  # the target's CPU threads: a reply alone may have left its ssd share set
        self._cond = threading.Condition()
        self._asks: list[_Ask] = []
        self._leading = False
        self.decodes = 0  # shared decodes made (rows per decode: rows / decodes)
        self.rows = 0

    def ar(self, target: Target) -> tuple[Verdict, float]:
        """``target``'s next token from a decode shared with the other replies; (its verdict, the decode's time)."""
        ask = _Ask(target)
        with self._cond:
            self._asks.append(ask)
            self._cond.notify_all()
            while not ask.done:
                if self._leading:
                    self._cond.wait()
                    continue
                self._leading = True
                end = time.monotonic() + GATHER_S
                while len(self._asks) < self._slots.shared and (left := end - time.monotonic()) > 0:
                    self._cond.wait(left)
                batch, self._asks = self._asks, []
                self._cond.release()
                try:
                    self._slots.run(functools.partial(self._round, batch))
                finally:
                    self._cond.acquire()
                    self._leading = False
                    self._cond.notify_all()
        if ask.error is not None:
            raise ask.error
        assert ask.verdict is not None
        return ask.verdict, ask.seconds

    def _round(self, batch: list[_Ask]) -> None:
        """Every ask in ``batch`` answered, piece by piece (on the decoding thread, the context's lock held:
        Slots.run); the replies of a piece go on as soon as it is decoded."""
        by_seq = {ask.target.seq: ask for ask in batch}
        try:
            for piece in pieces(list(by_seq), self._width):
                asks = [by_seq[seq] for seq in piece]
                self._decode(asks)
                self._answered(asks)
        finally:
            self._answered(batch)

    def _answered(self, asks: list[_Ask]) -> None:
        with self._cond:
            for ask in asks:
                ask.done = True
            self._cond.notify_all()

    def _decode(self, batch: list[_Ask]) -> None:
        """One decode of every ask in ``batch``, a piece: sequences with consecutive ids, in order."""
        ctx = batch[0].target.ctx
        t0 = time.perf_counter()
        try:
            ctx.set_threads(self._threads, self._threads)
            tokens: list[int] = []
            positions: list[int] = []
            seqs: list[int] = []
            for ask in batch:
                rows, p_r = ask.target.rows(NO_DRAFT)
                tokens += rows
                positions.append(p_r)
                seqs.append(ask.target.seq)
            ctx.decode_out(tokens, positions, seqs, range(len(batch)))
            seconds = time.perf_counter() - t0
            for i, ask in enumerate(batch):
                try:
                    ask.verdict = ask.target.accept(NO_DRAFT, ctx.outputs([i]))
                except Exception as exc:  # this reply's own fault (its grammar): the others go on
                    ask.error = exc
                ask.seconds = seconds
        except BaseException as exc:  # the decode itself: every reply in it hears of it
            for ask in batch:
                ask.error = ask.error or exc
        finally:
            self.decodes += 1
            self.rows += len(batch)
