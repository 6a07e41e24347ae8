"""``python -m engine chat-format``: the prompt a request renders to, the message an output parses to, and one
line (exit 2) for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli.main import main
from tests.tool_models import write_tools_model

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tools_model(tmp_path_factory.mktemp("fmt") / "t.gguf")


def _request(tmp_path: Path, body: object) -> str:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    return str(path)


def test_prints_the_rendered_prompt(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    req = _request(tmp_path, {"messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": [WEATHER]})
    assert main(["chat-format", "--model", str(model), "--request", req]) == 0
    out = capsys.readouterr()
    assert "<tools>" in out.out and "get_weather" in out.out and out.out.endswith("<|im_start|>assistant\n")
    assert "family: hermes" in out.err


def test_parses_an_output(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    req = _request(tmp_path, {"messages": [{"role": "user", "content": "Weather?"}], "tools": [WEATHER]})
    output = tmp_path / "out.txt"
    output.write_text('<think>the user wants weather</think>\n<tool_call>\n{"name": "get_weather", "arguments": '
                      '{"city": "Oslo"}}\n</tool_call>', encoding="utf-8")
    assert main(["chat-format", "--model", str(model), "--request", req, "--parse", str(output)]) == 0
    msg = json.loads(capsys.readouterr().out)
    assert msg["content"] is None and msg["reasoning_content"] == "the user wants weather"
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg["tool_calls"]] == [
        ("get_weather", {"city": "Oslo"})]


@pytest.mark.parametrize("body", ["{not json", '{"messages": []}', '{"messages": "hi"}'])
def test_bad_requests_are_one_line(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   body: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(body, encoding="utf-8")
    assert main(["chat-format", "--model", str(model), "--request", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --request") and err.count("\n") == 1 and "Traceback" not in err
