"""The server's seed: one seeded request gives one text under auto and in every fixed mode (coupled sampling), and
every reply names what a seed's reply depends on (``system_fingerprint``: model files, build, sampling scheme)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from engine import Engine, EngineConfig
from engine.server import LocalServer
from tests.server_helpers import client, serve
from tests.tiny_models import TinyPair

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def server(tiny: TinyPair) -> Iterator[LocalServer]:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024, threads=1, draft_threads=1)) as eng:
        with serve(eng) as srv:
            yield srv


def _ask(server: LocalServer, seed: int = 7, **extra: Any) -> Any:
    return client(server).chat.completions.create(
        model=server.model_id, messages=[{"role": "user", "content": "Hello there"}], max_tokens=32, seed=seed,
        temperature=1.0, **extra)


def test_a_seeded_request_gives_one_text_in_every_mode(server: LocalServer) -> None:
    replies = [_ask(server) for _ in range(3)]  # auto: its plan follows live timings
    replies += [_ask(server, extra_body={"mode": mode}) for mode in ("ar", "sd", "ssd", "lookup")]
    texts = {r.choices[0].message.content for r in replies}
    assert len(texts) == 1, texts
    fingerprints = {r.system_fingerprint for r in replies}
    assert len(fingerprints) == 1 and str(next(iter(fingerprints))).startswith("fp_")
    other = _ask(server, seed=8).choices[0].message.content
    assert other != replies[0].choices[0].message.content


def test_streamed_chunks_carry_the_fingerprint(server: LocalServer) -> None:
    whole = _ask(server)
    chunks = list(_ask(server, stream=True))
    assert {c.system_fingerprint for c in chunks} == {whole.system_fingerprint}
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == whole.choices[0].message.content
