"""Soak (marker ``slow``, opt-in): 200 replies across every mode, with stops, closes and abandoned replies;
memory, threads and file descriptors stay flat after a warm-up.

Run with ``python -m pytest -m slow tests/test_soak.py -s`` (or ``SSD_CHAT_SLOW_TESTS=1``); ``-s`` prints the
figures.
"""

from __future__ import annotations

import gc
import os
import threading
from pathlib import Path

import pytest

from engine import MODES, Engine, EngineConfig, GenerationParams, SamplingParams
from tests.tiny_models import TinyPair

REPLIES = 200
WARM_UP = 25
RSS_SLACK = 10 << 20


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _snapshot() -> tuple[int, int, int]:
    gc.collect()
    return _rss(), len(os.listdir("/proc/self/task")), len(os.listdir("/proc/self/fd"))


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_two_hundred_replies_stay_flat(tiny: TinyPair) -> None:
    figures: list[tuple[int, int, int]] = []
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024)) as eng:
        warm = (0, 0, 0)
        for i in range(REPLIES):
            mode = MODES[i % len(MODES)]
            sampling = SamplingParams(temperature=0.8, top_p=0.95, seed=i) if i % 2 else SamplingParams()
            prompt = eng.messages_tokens([
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": f"Tell me story number {i} <|im_end|> about {'x' * (i % 17)}"},
            ])
            stop = threading.Event()
            gen = eng.generate(prompt, GenerationParams(mode=mode, max_tokens=48 + i % 32, sampling=sampling), stop)
            kind = i % 5
            if kind == 1:  # stop from another thread after a few tokens
                for n, _ in enumerate(gen):
                    if n == 8:
                        threading.Thread(target=stop.set).start()
            elif kind == 2:  # abandoned mid-reply: the next generate closes it
                it = iter(gen)
                for _ in range(5):
                    next(it, None)
                continue
            elif kind == 3:  # closed from another thread while a consumer thread iterates it
                seen = threading.Event()

                def consume(g: object = gen, s: threading.Event = seen) -> None:
                    for n, _ in enumerate(g):  # type: ignore[call-overload]
                        if n == 5:
                            s.set()
                    s.set()

                t = threading.Thread(target=consume)
                t.start()
                seen.wait(60)
                gen.close()
                t.join(60)
                assert not t.is_alive()
            else:
                gen.run()
            assert gen.stats.finish_reason in ("stop", "length", "stopped", "context")
            if i + 1 == WARM_UP:
                warm = _snapshot()
            if i + 1 >= WARM_UP and (i + 1) % 25 == 0:
                figures.append(_snapshot())
        end = _snapshot()
    rss = [f[0] / 2**20 for f in figures]
    print(f"\nsoak: {REPLIES} replies over {', '.join(MODES)}; RSS after warm-up {warm[0] / 2**20:.1f} MiB, "
          f"then {', '.join(f'{r:.1f}' for r in rss)} MiB; threads {warm[1]} -> {end[1]}; fds {warm[2]} -> {end[2]}")
    assert end[0] - warm[0] <= RSS_SLACK, f"RSS grew {(end[0] - warm[0]) / 2**20:.1f} MiB"
    assert end[1] == warm[1], "threads leaked"
    assert end[2] == warm[2], "file descriptors leaked"
