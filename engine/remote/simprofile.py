"""A remote target for the simulated bench (``bench --scenarios S``): one verify costs the remote device's compute
for its width, one round trip (llama.cpp's RPC runs a decode in one: inputs and the graph run go out without
waiting, the result comes back) and its bytes over the link's bandwidth."""

from __future__ import annotations

# The remote device's compute by batch width (ms): the real pair's 1.5B target on one CPU thread of an RPC server
# on this machine, its graph reused (scenario R's set-up, with no delay added; docs/benchmarks.md).
COMPUTE_MS = ((1, 148.7), (2, 227.7), (5, 391.9), (9, 506.1))
UP_BYTES = {1: 8_900, 2: 15_600, 5: 35_600, 9: 62_300}  # a decode's inputs and its graph replay, sent up
DOWN_BYTES = 1_000  # what comes back with the sampler on the remote device: ids, not 608 KB logits rows
BANDWIDTH_BPS = 1e9  # a gigabit LAN


def remote_verify(rtt_ms: float, bandwidth_bps: float = BANDWIDTH_BPS) -> tuple[tuple[int, float], ...]:
    """``(width, seconds)`` of one verify with the target ``rtt_ms`` away (a simulated machine's verify times)."""
    return tuple((w, (ms + rtt_ms) / 1000 + (UP_BYTES[w] + DOWN_BYTES) * 8 / bandwidth_bps) for w, ms in COMPUTE_MS)
