"""A remote target for the simulated bench (``bench --scenarios S``): one verify costs the remote device's compute
for its width, one round trip (the remote runs every layer but the output layer, which runs at home: a decode of any
width is one request and one reply) and its bytes over the link's bandwidth.

Fitted to the real pair on this 2-core host with nothing else running: the target (Qwen2.5-Coder 1.5B Q4_K_M) on an
RPC server with one thread, the draft (0.5B) and the output layer in the engine here, one thread each.
"""

from __future__ import annotations

# A decode's seconds by width (ms) over loopback with no delay added: the remote layers, the output layer at home and
# RPC's own cost (1 row 146-148 ms, 5 rows 348-367; decoded locally on one thread the same widths take 115 and 282).
# Other widths lie on the line through these two (beyond 5 rows an upper bound: a CPU batch grows sublinearly).
COMPUTE_MS = ((1, 147.0), (5, 357.5))
# A proxy adding 25 ms each way raised them to 192-201 and 396-419 ms: one 50 ms round trip whatever the width.
UP_BYTES_PER_ROW = 7_000  # a row's inputs, sent up
DOWN_BYTES_PER_ROW = 6_100  # its hidden state back, for the output layer at home (not a 608 KB logits row)
BANDWIDTH_BPS = 1e9  # a gigabit LAN
# A verify width the target's context runs for the first time costs four more round trips (llama.cpp builds its graph
# and RPC's buffer calls go out): +200 to +213 ms at 25 ms each way for widths 1 to 9, nothing measurable at no delay.
NEW_SHAPE_TRIPS = 4
DRAFT_TOKEN_S = 70.8e-3  # the draft at home on one thread, measured alone (greedy ar of the 0.5B, 48 tokens)
# Greedy, sd at K 4 emitted 4.23 tokens a round over scenario R's four prompts (docs/benchmarks.md): per position
# 0.943, falling with depth as the simulated regimes' acceptance does (engine/sim/coupled.position_acceptance).
SD_TOKENS_PER_ROUND = 4.23
# The share of a 4-token sd draft accepted on scenario R's prompts, greedy: code-fib 0.96 and code-csv 0.98, sum-http
# 0.86, chat-git 0.57. Chat's drafts are mostly all accepted or rejected at once: fixed ssd's one branch (after a
# full acceptance) hit 0.57 of its rounds there, where independent positions at that share would hit a third.
CODE_SHARE = (0.96 + 0.98) / 2
SUMMARY_SHARE = 0.86
CHAT_SHARE = 0.57


def remote_verify(rtt_ms: float, bandwidth_bps: float = BANDWIDTH_BPS,
                  compute_ms: tuple[tuple[int, float], ...] = COMPUTE_MS) -> tuple[tuple[int, float], ...]:
    """``(width, seconds)`` of one verify with the target ``rtt_ms`` away (a simulated machine's verify times), the
    remote device's decode taking ``compute_ms`` by width (the RPC server on this host's CPU unless given)."""
    per_row = (UP_BYTES_PER_ROW + DOWN_BYTES_PER_ROW) * 8 / bandwidth_bps
    return tuple((w, (ms + rtt_ms) / 1000 + w * per_row) for w, ms in compute_ms)


def new_shape_seconds(rtt_ms: float) -> float:
    """What a verify of a width new to the target's context adds with the target ``rtt_ms`` away."""
    return NEW_SHAPE_TRIPS * rtt_ms / 1000
