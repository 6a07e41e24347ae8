"""The slowest transfer a download accepts: below it for a whole window, the server is not really sending."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from .hub_http import DownloadError

# At 1 KiB/s a 1 GB model takes eleven days: a link or server that slow is not working. A read timeout
# (huggingface_hub's 10 s) catches a server that sends nothing; this catches one that sends a byte now and then.
MIN_RATE_BPS = 1024.0
# Long enough that a healthy connection's stall (a congested hop, a Wi-Fi roam) recovers inside it.
MIN_RATE_WINDOW_S = 60.0


@dataclass(frozen=True)
class RateFloor:
    """At least ``bps`` bytes a second, measured over windows of ``window_s`` seconds."""

    bps: float = MIN_RATE_BPS
    window_s: float = MIN_RATE_WINDOW_S


RATE_FLOOR = RateFloor()


class TooSlowError(DownloadError):
    """The server sent under the rate floor for a whole window; the partial file is kept for a resume."""


class RateWatch:
    """Counts one response's bytes and raises :class:`TooSlowError` when a window ends under the floor."""

    def __init__(self, floor: RateFloor, what: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.floor = floor
        self.what = what
        self._clock = clock
        self._t0 = clock()
        self._bytes = 0

    def add(self, n: int) -> None:
        self._bytes += n
        now = self._clock()
        spent = now - self._t0
        if spent < self.floor.window_s:
            return
        if self._bytes < self.floor.bps * spent:
            raise TooSlowError(
                f"{self.what}: the server sent {self._bytes:,} bytes in {spent:.0f} s, under the "
                f"{self.floor.bps:,.0f} bytes/s a download needs; run it again to resume"
            )
        self._t0, self._bytes = now, 0
