"""Verify exactness states the promise the README states, the CPU's Q4_K_M exception included."""

from __future__ import annotations

from pathlib import Path

from app.exactness.text import NEAR_TIE, PROMISE, meaning

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_promise_names_the_q4_k_m_exception_of_the_readme() -> None:
    readme = " ".join(README.read_text(encoding="utf-8").split())
    assert "On the CPU the exception is the shipped Q4_K_M target" in readme
    assert "token-identical on the CPU, except with a Q4_K target such as the shipped Q4_K_M" in PROMISE
    cpu_tie = meaning(NEAR_TIE / 2, "CPU")
    assert "unless the target is Q4_K quantized (the shipped Q4_K_M)" in cpu_tie and "please report" in cpu_tie
    assert "Q4_K" not in meaning(2 * NEAR_TIE, "CPU")  # a clear choice: no rounding explains it
