"""Fill-in-the-middle ends where the middle ends: at the vocabulary's FIM tokens (pad, file and repository
separators, a new FIM marker) and where it starts writing the suffix again, through the real server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from engine import Engine, EngineConfig
from engine.core.backend import Model
from engine.core.fim import fim_ends, suffix_head
from engine.server import LocalServer
from tests.server_helpers import serve
from tests.tiny_models import Vocab, write_model
from tests.tool_models import CONTROL, FIM_TEXTS, QWEN_TEMPLATE, tools_vocab

pytestmark = pytest.mark.timeout(300)

ENDS = ("<|fim_pad|>", "<|file_sep|>", "<|repo_name|>", "<|endoftext|>")
LIMIT = 24  # max_tokens: a middle that did not end runs to it


def _vocab() -> Vocab:
    v = tools_vocab()
    return Vocab(v.model, [*v.tokens, *ENDS], [*v.scores, *[0.0] * len(ENDS)], [*v.types, *[CONTROL] * len(ENDS)],
                 v.bos, v.eos, v.unk)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, LocalServer]]:
    folder = tmp_path_factory.mktemp("fim-end")
    target = write_model(folder / "t.gguf", vocab=_vocab(), seed=1, n_layer=3, logit_scale=6.0,
                         chat_template=QWEN_TEMPLATE)
    draft = write_model(folder / "d.gguf", vocab=_vocab(), seed=1, n_layer=3, logit_scale=6.0, noise=0.05,
                        chat_template=QWEN_TEMPLATE)
    with Engine(EngineConfig(str(target), str(draft), n_ctx=1024, threads=1, draft_threads=1)) as eng, \
            serve(eng) as srv:
        yield eng, srv


def _ids(m: Model) -> dict[str, int]:
    return {text: m.tokenize(text, add_special=False, parse_special=True)[0] for text in (*ENDS, *FIM_TEXTS)}


def _fim(srv: LocalServer, suffix: str, bias: dict[int, float], mode: str = "ar") -> dict[str, Any]:
    r = httpx.post(f"{srv.url}/completions", timeout=60, json={
        "model": srv.model_id, "prompt": "def f(x):\n    ", "suffix": suffix, "max_tokens": LIMIT, "temperature": 0,
        "logit_bias": {str(k): v for k, v in bias.items()}, "mode": mode})
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_the_suffix_head() -> None:
    assert suffix_head("\n    return c\n") == "\n    return c"
    assert suffix_head("    y = x + 1\n    return y\n    pass\n") == "    y = x + 1\n    return y"
    assert suffix_head("\n  a\n  b\n  c = 1234567890\n") == "\n  a\n  b\n  c = 1234567890"  # until 12 characters
    assert suffix_head(")") is None and suffix_head("\n}\n") is None and suffix_head("") is None


def test_the_vocabularys_fim_tokens_end_a_middle(pair: tuple[Engine, LocalServer]) -> None:
    eng, srv = pair
    ids = _ids(eng.target_model)
    assert {ids[t] for t in ("<|fim_pad|>", "<|file_sep|>", "<|repo_name|>", *FIM_TEXTS)} <= fim_ends(
        eng.target_model)
    for text in (*ENDS, *FIM_TEXTS):
        for mode in ("ar", "ssd"):
            done = _fim(srv, "\n    return y\n", {ids[text]: 100.0}, mode)
            choice = done["choices"][0]
            assert (choice["text"], choice["finish_reason"]) == ("", "stop"), (text, mode, done)


def test_a_middle_that_writes_the_suffix_is_cut(pair: tuple[Engine, LocalServer]) -> None:
    eng, srv = pair
    m = eng.target_model
    z = next(t for t in range(m.n_vocab) if m.token_bytes(t) == b"z")
    runs_on = _fim(srv, "zzzzq\nzzzzzzzzq\n", {z: 100.0})["choices"][0]  # its head is not what the middle writes
    assert runs_on["finish_reason"] == "length" and runs_on["text"] == "z" * LIMIT
    for mode in ("ar", "sd", "ssd", "auto"):
        cut = _fim(srv, "zzzzzzzzzzzzzz\n    return y\n", {z: 100.0}, mode)["choices"][0]
        assert (cut["text"], cut["finish_reason"]) == ("", "stop"), (mode, cut)
