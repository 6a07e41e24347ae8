"""Command-line help: every option of ``generate`` and ``bench`` says what it does and its default;
``bench --help`` explains every scenario the benchmark accepts."""

from __future__ import annotations

import argparse
import os
import string
import subprocess
import sys
from pathlib import Path

import pytest

from engine import EngineError
from engine.bench.common import scenarios
from engine.cli.bench import SCENARIOS
from engine.cli.main import build_parser, main


def _sub(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub = action.choices[name]
    assert isinstance(sub, argparse.ArgumentParser)
    return sub


@pytest.mark.parametrize("command", ["generate", "bench"])
def test_every_option_has_help_with_its_default(command: str) -> None:
    sub = _sub(command)
    formatter = sub._get_formatter()
    for action in sub._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{command} {action.option_strings[0]} has no help text"
        shown = formatter._expand_help(action)
        assert action.required or "default" in shown, f"{command} {action.option_strings[0]}: {shown!r}"


def test_help_shows_the_values(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for text in ("(default: auto)", "(default: 128)", "(default: 0.0)", "(default: 4096)", "(default: off)"):
        assert text in out


def test_bench_help_explains_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--help"]) == 0
    out = capsys.readouterr().out
    assert "scenarios:" in out
    for name, text in SCENARIOS.items():
        assert f"  {name}  {text.split()[0]}" in out
    # every scenario the benchmark accepts is explained, and only those
    f16 = Path("f16.gguf")
    for letter in string.ascii_uppercase:
        if letter in SCENARIOS and letter != "O":  # O runs alone, in its own module
            assert scenarios([letter], Path("t.gguf"), 2, f16)
        elif letter != "O":
            with pytest.raises(EngineError, match="unknown scenario"):
                scenarios([letter], Path("t.gguf"), 2, f16)


ROOT = Path(__file__).resolve().parent.parent
TOOL_ROOMS = ("bench", "sim", "tiny")  # the rooms whose modules may run on their own (python -m engine.ROOM.NAME)


def runnable_tools() -> list[str]:
    return sorted(f"{room}.{p.stem}" for room in TOOL_ROOMS for p in (ROOT / "engine" / room).glob("*.py")
                  if '__name__ == "__main__"' in p.read_text(encoding="utf-8"))


def test_the_runnable_tools_are_the_known_ones() -> None:
    assert runnable_tools() == ["bench.constrained", "bench.coupled", "bench.process", "bench.ratios", "sim.replay",
                                "tiny.models", "tiny.synthetic"]


@pytest.mark.parametrize("tool", runnable_tools())
def test_every_runnable_tool_has_a_help_that_writes_nothing(tool: str, tmp_path: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in (ROOT / "resources").iterdir()}
    done = subprocess.run([sys.executable, "-m", f"engine.{tool}", "--help"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout
    assert {p: p.stat().st_mtime_ns for p in (ROOT / "resources").iterdir()} == before
    assert list(tmp_path.iterdir()) == []


def test_serve_help_shows_every_default() -> None:
    sub = _sub("serve")
    formatter = sub._get_formatter()
    for action in sub._actions:
        if not action.option_strings or action.default in (None, [], argparse.SUPPRESS):
            continue
        assert "default" in formatter._expand_help(action), f"serve {action.option_strings[0]}"
