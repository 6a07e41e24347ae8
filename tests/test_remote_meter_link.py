"""The link meter in the engine's own process: llama.cpp reaches each remote machine through a counting relay,
whose bytes are the stats' ``link_*`` figures (across the engine process too) and whose view of owed answers is
the deadline's, loads included; with real RPC servers as child processes on 127.0.0.1 and the tiny models (a
DelayProxy in between counts the same bytes independently)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine import EngineConfig
from engine.process import EngineProcess
from engine.remote.deadline import DEADLINE_ENV
from engine.remote.proxy import DelayProxy
from engine.tiny.models import TinyPair
from tests.rpc_helpers import address, end, generate_argv, needs_rpc, rpc_server
from tests.server_helpers import client, serve, wait_until

pytestmark = [needs_rpc, pytest.mark.timeout(300)]

ROW_BYTES = 4096 * 4  # one full logits row of the tiny target (4,096-token vocabulary, f32)

GENERATE_ON_CUE = """
import json, sys
from engine import EngineConfig, GenerationParams
from engine.core.sampling import SamplingParams
from engine.engine import Engine
target, draft, rpc, mode = sys.argv[1:5]
with Engine(EngineConfig(target, draft, n_ctx=512, threads=1, draft_threads=1, rpc=(rpc,))) as eng:
    prompt = eng.tokenize("Once upon a time")
    print("loaded", flush=True)
    sys.stdin.readline()
    gen = eng.generate(prompt, GenerationParams(mode=mode, max_tokens=32, sampling=SamplingParams(0.0)))
    tokens = [ev.token for ev in gen]
    print(json.dumps(gen.stats.to_dict()), flush=True)
    sys.stdin.readline()
"""


@pytest.mark.parametrize("mode", ["ar", "ssd"])
def test_the_stats_count_the_bytes_a_proxy_in_between_counts(tiny: TinyPair, tmp_path: Path, mode: str) -> None:
    with rpc_server(tmp_path) as (endpoint, _srv), DelayProxy(address(endpoint), 0) as proxy:
        proc = subprocess.Popen([sys.executable, "-c", GENERATE_ON_CUE, str(tiny.target), str(tiny.draft_related),
                                 proxy.endpoint, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            assert proc.stdout.readline().strip() == "loaded"
            before = proxy.counts()
            proc.stdin.write("\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            assert line, proc.communicate(timeout=60)[1][-3000:]
            stats = json.loads(line)
            moved = (stats["link_sent"], stats["link_received"])
            # both count what they read; the proxy's thread may take a moment longer
            wait_until(lambda: tuple(a - b for a, b in zip(proxy.counts(), before, strict=True)) == moved,
                       "the proxy counted the generation's bytes as the relay did", limit_s=5)
        finally:
            proc.communicate("\n", timeout=60)
    assert proc.returncode == 0
    assert stats["rounds"] > 0 and stats["new_tokens"] > 0
    assert stats["link_received_per_round"] < ROW_BYTES / 4  # the picked ids come back, no logits row
    assert stats["link_sent_per_round"] > 0
    total = stats["link_sent"] + stats["link_received"]
    assert stats["link_bytes_per_token"] == pytest.approx(total / stats["new_tokens"])


def test_the_server_reply_carries_the_link_figures_across_the_engine_process(tiny: TinyPair, tmp_path: Path) -> None:
    with rpc_server(tmp_path) as (endpoint, _srv):
        eng = EngineProcess(EngineConfig(str(tiny.target), n_ctx=512, threads=1, rpc=(endpoint,)))
        try:
            with serve(eng) as http:
                reply = client(http).chat.completions.create(
                    model="target", messages=[{"role": "user", "content": "Hi"}], max_tokens=8, temperature=0)
        finally:
            eng.close()
    link = (reply.model_extra or {})["speculation"]["link"]
    assert link["bytes_sent"] > 0 and link["bytes_received"] > 0
    assert 0 < link["bytes_received_per_round"] < ROW_BYTES / 4
    assert link["bytes_per_token"] > 0


def test_a_server_frozen_during_the_load_runs_into_the_deadline(tiny: TinyPair, tmp_path: Path) -> None:
    with rpc_server(tmp_path) as (endpoint, srv), DelayProxy(address(endpoint), 0.02) as proxy:
        # 20 ms each way: the load's many answered requests (9 connections, buffers, bases) take seconds
        proc = subprocess.Popen(generate_argv(tiny.target, proxy.endpoint, "--max-tokens", "4"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, DEADLINE_ENV: "2"})
        try:
            wait_until(lambda: proxy.counts()[0] > 50_000, "the load sends the weights", limit_s=120)
            os.kill(srv.pid, signal.SIGSTOP)  # a silent partition mid-load: no reset, no answer
            _out, err = proc.communicate(timeout=60)  # the deadline ends it, not a hang
            assert proc.returncode == 2
        finally:
            if proc.poll() is None:
                proc.kill()
            end(srv)
    text = err.decode("utf-8", "replace")
    assert "Traceback" not in text and "[target" not in text, text  # ended before the load was done
    assert text.strip().splitlines()[-1] == (
        f"error: the engine stopped: llama.cpp aborted: ssd-chat:0: remote machine {proxy.endpoint} gave no answer "
        "for 2 s (frozen, or the network cut): the engine stopped waiting")
