"""The link meter's parts: the counting relay (engine.remote.relay) between llama.cpp and a real RPC server child
on 127.0.0.1 counts what a DelayProxy in between counts, its framing finds each request and answer, and the stats
line shows a round's bytes only for a remote target."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from app.chat.stats_text import stats_text
from engine.remote import parse_endpoint
from engine.remote.proxy import DelayProxy
from engine.remote.relay import REPLY_HEAD, REQUEST_HEAD, Framer, Relay
from engine.remote.wire import CMD_HELLO
from engine.tiny.models import TinyPair
from tests.rpc_helpers import address, generate_argv, needs_rpc, rpc_server
from tests.server_helpers import wait_until

CMD_SET_TENSOR, CMD_GET_TENSOR = 6, 8  # ggml-rpc.cpp's rpc_cmd


def _request(cmd: int, payload: bytes) -> bytes:
    return struct.pack("<BQ", cmd, len(payload)) + payload


def test_the_framer_finds_each_request_and_answer_however_the_stream_is_cut() -> None:
    stream = _request(CMD_HELLO, bytes(24)) + _request(CMD_SET_TENSOR, bytes(1000))
    stream += _request(CMD_GET_TENSOR, b"x" * 40)
    replies = struct.pack("<Q", 28) + bytes(28) + struct.pack("<Q", 0) + struct.pack("<Q", 300) + bytes(300)
    for cut in (1, 5, 9, 10, 64, len(stream)):
        up, down = Framer(REQUEST_HEAD), Framer(REPLY_HEAD)
        cmds, done = [], 0
        for i in range(0, len(stream), cut):
            c, d = up.feed(stream[i:i + cut])
            cmds += c
            done += d
        assert (cmds, done) == ([CMD_HELLO, CMD_SET_TENSOR, CMD_GET_TENSOR], 3), cut
        answers = sum(down.feed(replies[i:i + cut])[1] for i in range(0, len(replies), cut))
        assert answers == 3, cut


def test_the_stats_line_says_what_a_round_cost_on_the_link_only_with_a_remote_target() -> None:
    local = {"mode": "ssd", "new_tokens": 24, "finish_reason": "stop"}
    assert "link" not in stats_text(local)
    remote = {**local, "link_sent_per_round": 2600.0, "link_received_per_round": 420.0}
    assert "link 3.0 KB a round" in stats_text(remote)
    assert "link 950 B a round" in stats_text({**remote, "link_sent_per_round": 530.0})




@needs_rpc
@pytest.mark.timeout(300)
def test_a_relay_counts_every_byte_a_proxy_counts_and_lets_each_connection_go(tiny: TinyPair, tmp_path: Path) -> None:
    with rpc_server(tmp_path) as (endpoint, _srv), DelayProxy(address(endpoint), 0) as proxy:
        relay = Relay(parse_endpoint(proxy.endpoint))
        try:
            # a load opens several connections one after another: one left half open would hang the next
            r = subprocess.run(generate_argv(tiny.target, relay.address, "--max-tokens", "8"), capture_output=True,
                               text=True, timeout=120, check=False)
            assert r.returncode == 0, r.stderr[-3000:]
            wait_until(lambda: proxy.counts() == (relay.sent, relay.received), "the proxy counted the relay's bytes",
                       limit_s=5)
        finally:
            relay.close()
    assert relay.sent > 100_000 and relay.received > 0  # the weights went up through it
