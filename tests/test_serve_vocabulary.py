"""``serve`` with the engine in its own process reads the target's vocabulary through that process: a tool chat,
fill-in-the-middle, logit_bias's bounds and logprobs' token texts, with no copy of the target loaded in the
server's own process."""

from __future__ import annotations

import gc
from pathlib import Path

import httpx
import pytest

from engine import EngineConfig, EngineProcess
from engine.core.backend import Model
from tests.server_helpers import chat_body, error_of, serve
from tests.tool_models import write_tools_model

pytestmark = pytest.mark.timeout(180)

TOOL = {"type": "function", "function": {"name": "read_file", "description": "Read a text file.",
                                         "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}


def loaded_here(path: Path) -> list[Model]:
    """The models of ``path`` loaded in this process (a vocabulary-only load is one)."""
    return [o for o in gc.get_objects() if isinstance(o, Model) and o.path == path]


def test_the_server_holds_no_copy_of_the_target(tmp_path: Path) -> None:
    target = write_tools_model(tmp_path / "t.gguf")
    with EngineProcess(EngineConfig(str(target), n_ctx=2048, threads=1)) as eng, serve(eng) as server, \
            httpx.Client(base_url=server.url, timeout=60) as http:
        tools = http.post("/chat/completions", json=chat_body("t", "Read /n", tools=[TOOL], max_tokens=8))
        assert tools.status_code == 200, tools.text
        fim = http.post("/completions", json={"model": "t", "prompt": "def f(x):\n", "suffix": "\n    return y\n",
                                              "max_tokens": 8, "temperature": 0})
        assert fim.status_code == 200, fim.text
        bias = http.post("/chat/completions", json=chat_body("t", logit_bias={str(eng.n_vocab): 5}, max_tokens=4))
        assert error_of(bias, 400)["param"] == "logit_bias"
        lp = http.post("/chat/completions", json=chat_body("t", logprobs=True, top_logprobs=2, max_tokens=6,
                                                           temperature=0))
        assert lp.status_code == 200, lp.text
        entries = lp.json()["choices"][0]["logprobs"]["content"]
        assert len(entries) == 6 and all(bytes(e["bytes"]).decode("utf-8", "replace") == e["token"] for e in entries)
        assert all(len(e["top_logprobs"]) == 2 for e in entries)
        assert not loaded_here(target)
