"""One sequence's token record, kept in step with the context's memory: cut-backs, checkpoints, prefix reuse."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from engine.errors import PrefillStopped

from .outputs import Outputs
from .recurrent import PROMPT, ROUND

if TYPE_CHECKING:
    from .context import Context


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix, by slice comparisons (C speed; a round calls this on the whole context)."""
    x = a if isinstance(a, list) else list(a)
    y = b if isinstance(b, list) else list(b)
    n = min(len(x), len(y))
    if x[:n] == y[:n]:
        return n
    lo, hi = 0, n  # x[:lo] == y[:lo]; x[:hi] != y[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if x[lo:mid] == y[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class KVTrack:
    """One sequence of a context and the tokens it holds, kept in step with the KV cache.

    A recurrent state cannot be cut back past what llama.cpp's last decode left removable: such a cut goes
    back to the newest checkpoint at or before it (a spare sequence holding the state after ``tokens[:mark]``),
    or to nothing, and the next sync decodes the rest again. ``tokens`` never claims a state the memory lacks.

    With a ``grid``, a prompt is read in chunks of ``grid`` positions from a multiple of it, and a later sync
    reuses only the whole chunks read so (``exact``): llama.cpp's rows depend on the batch that made them, so a
    position is only reused where it was made as every fresh read makes it.
    """

    def __init__(self, ctx: Context, seq: int = 0, grid: int = 0) -> None:
        self.ctx = ctx
        self.seq = seq
        self.grid = grid
        self.exact = 0  # leading tokens read in whole grid chunks (reusable as a fresh read would make them)
        self.tokens: list[int] = []
        self.synced = 0  # tokens the latest sync decoded
        self.marks: dict[int, int] = {}  # spare sequence -> the prefix length whose state it holds
        self.checkpoint_s = 0.0  # time spent keeping checkpoints and going back to them
        self.restores = 0  # cut-backs that went back to a checkpoint (or to nothing)

    def trim(self, keep: int) -> None:
        """Hold at most ``keep`` tokens (fewer where the memory could only go back further)."""
        if keep >= len(self.tokens):
            return
        self.forget_after(keep)
        self.exact = min(self.exact, keep - keep % self.grid if self.grid else keep)
        if self.ctx.seq_rm(self.seq, keep, -1):
            del self.tokens[keep:]
            return
        t0 = time.perf_counter()
        self.restores += 1
        self.ctx.seq_rm(self.seq, -1, -1)  # removing everything always succeeds
        seq, mark = max(self.marks.items(), key=lambda m: m[1], default=(-1, 0))
        if seq >= 0:
            self.ctx.seq_cp(seq, self.seq, -1, -1)
        del self.tokens[mark:]
        self.checkpoint_s += time.perf_counter() - t0

    def forget_after(self, n: int) -> None:
        """Drop the checkpoints past the first ``n`` tokens (their cells hold a path no longer wanted)."""
        for seq in [s for s, m in self.marks.items() if m > n]:
            self.ctx.seq_rm(seq, -1, -1)
            del self.marks[seq]

    def checkpoint(self, slot: int = ROUND) -> None:
        """Keep the state after ``tokens`` in the context's spare sequence ``slot`` (no-op without spares)."""
        spare = self.ctx.spare
        if not spare or self.marks.get(spare[slot]) == len(self.tokens):
            return
        t0 = time.perf_counter()
        seq = spare[slot]
        self.ctx.seq_rm(seq, -1, -1)
        self.ctx.seq_cp(self.seq, seq, -1, -1)  # a recurrent cell is shared until seq 0's next decode copies it
        self.marks[seq] = len(self.tokens)
        self.checkpoint_s += time.perf_counter() - t0

    def before_cut(self, removable: int) -> None:
        """A round is about to decode tokens it may give back ``removable`` of: keep a checkpoint first where
        the memory could not."""
        if self.ctx.spare and removable > self.ctx.kind.rollback:
            self.checkpoint(ROUND)

    def unseen(self, committed: Sequence[int]) -> int:
        """Tokens of ``committed`` past the prefix the KV already holds (a sync decodes them, the last one at least)."""
        return len(committed) - common_prefix(self.tokens, committed)

    def keeps(self, committed: Sequence[int]) -> int:
        """The prefix a sync keeps: what the KV holds of ``committed``, less the last token (its row is read)."""
        return len(committed) - max(self.unseen(committed), 1)

    def reusable(self, committed: Sequence[int]) -> int:
        """The prefix of ``committed`` a sync reuses (on the grid: whole chunks read as a prompt)."""
        keep = self.keeps(committed)
        if self.grid:
            keep = min(keep, self.exact)
            keep -= keep % self.grid
        return keep

    def begin(self, committed: Sequence[int]) -> int:
        """Cut back to :meth:`reusable`'s prefix; the tokens held after it."""
        self.trim(self.reusable(committed))
        return len(self.tokens)

    def read(self, chunk: Sequence[int]) -> None:
        """``chunk`` was decoded after the tokens held, in one batch of its own (a grid chunk when whole)."""
        whole = bool(self.grid) and len(chunk) == self.grid and self.exact == len(self.tokens)
        self.tokens.extend(chunk)
        if whole:
            self.exact = len(self.tokens)

    @property
    def step(self) -> int:
        """The prompt chunk a sync decodes at once."""
        return self.grid or self.ctx.n_batch

    def sync(self, committed: Sequence[int]) -> npt.NDArray[np.float32]:
        """Make the KV hold exactly ``committed``, reusing the common prefix; return a copy of the last row."""
        spec = self.ctx.samplers.spec
        self.ctx.samplers.attach(None)
        try:
            return self.sync_out(committed).row(0).copy()
        finally:
            self.ctx.samplers.attach(spec)

    def sync_out(self, committed: Sequence[int], stop: Callable[[], bool] | None = None) -> Outputs:
        """:meth:`sync`, with the last token's output read in place (the round's path); ``stop``: see prefill_out."""
        keep = self.begin(committed)
        step = self.step
        try:
            out = self.ctx.prefill_out(committed[keep:], start=keep, seq_id=self.seq, stop=stop, step=step)
        except PrefillStopped as e:
            for i in range(keep, keep + e.decoded, step):  # what was read stays, for the next prefix
                self.read(committed[i : i + step])
            raise
        for i in range(keep, len(committed), step):
            self.read(committed[i : i + step])
        self.synced = len(committed) - keep
        return out

    def keep_prompt(self) -> None:
        """Keep the state after the prompt just read, where the next request sharing it starts again."""
        self.checkpoint(PROMPT)

    def decode_one(self, token: int) -> Outputs:
        out = self.ctx.decode_out([token], [len(self.tokens)], self.seq)
        self.tokens.append(token)
        return out

    def reset(self) -> None:
        self.ctx.clear()
        self.tokens.clear()
        self.marks.clear()
        self.exact = 0
