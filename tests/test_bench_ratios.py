"""The bench's per-prompt ratios: auto against the best fixed mode on the same prompt, lookup against ar."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from engine.bench.ratios import per_prompt, summary


def _groups() -> list[dict[str, object]]:
    tps = {"p1": {"ar": 10.0, "sd": 12.0, "lookup": 9.0, "auto": 11.4},
           "p2": {"ar": 10.0, "sd": 8.0, "lookup": 20.0, "auto": 20.0}}
    modes = ["ar", "sd", "lookup", "auto", "peer:llama-completion"]
    return [{"scenario": "A", "setting": "greedy", "mode": m,
             "runs": [_run(p, tps[p].get(m, 50.0)) for p in tps]} for m in modes]


def _run(prompt: str, tps: float) -> dict[str, object]:
    """One saved run decoding at ``tps`` (100 tokens)."""
    return {"prompt": prompt, "tokens_per_second": tps, "decode_tokens": 100, "decode_s": 100 / tps}


def test_auto_is_compared_with_the_best_fixed_mode_of_each_prompt() -> None:
    entries = {e["prompt"]: e for e in per_prompt(_groups())}
    assert entries["p1"]["best_fixed"] == "sd" and math.isclose(entries["p1"]["auto_vs_best"], 0.95)
    assert entries["p2"]["best_fixed"] == "lookup" and math.isclose(entries["p2"]["auto_vs_best"], 1.0)
    assert math.isclose(entries["p1"]["lookup_vs_ar"], 0.9) and math.isclose(entries["p2"]["lookup_vs_ar"], 2.0)
    (s,) = summary(list(entries.values()))
    assert math.isclose(s["auto_vs_best"]["geomean"], math.sqrt(0.95))
    assert math.isclose(s["auto_vs_best"]["lowest"], 0.95)
    # the same ratio for each fixed mode: ar is 10/12 of sd on p1 and 10/20 of lookup on p2
    assert math.isclose(s["fixed_vs_best"]["ar"], math.sqrt(10 / 12 * 0.5))
    assert math.isclose(s["fixed_vs_best"]["lookup"], math.sqrt(9 / 12)) and "ssd" not in s["fixed_vs_best"]


def test_the_ratios_print_again_from_a_saved_result(tmp_path: Path) -> None:
    saved = tmp_path / "bench.json"
    saved.write_text(json.dumps({"runs": _groups()}), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "engine.bench.ratios", str(saved)], capture_output=True,
                         text=True, check=True).stdout
    assert "auto / best fixed: geometric mean 0.97, lowest 0.95" in out
    assert "each fixed mode / best fixed, geometric mean: ar 0.65, sd 0.63, lookup 0.87" in out
    bad = subprocess.run([sys.executable, "-m", "engine.bench.ratios", str(tmp_path / "none.json")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error: cannot read")


def test_a_prompts_repeats_are_summed_as_tokens_over_seconds() -> None:
    runs = [{"prompt": "p", "tokens_per_second": 10.0, "decode_tokens": 100, "decode_s": 10.0},
            {"prompt": "p", "tokens_per_second": 20.0, "decode_tokens": 100, "decode_s": 5.0}]
    groups = [{"scenario": "A", "setting": "greedy", "mode": m, "runs": runs} for m in ("ar", "auto")]
    (entry,) = per_prompt(groups)
    assert math.isclose(entry["tokens_per_second"]["ar"], 200 / 15)  # not the mean of the rates (15)


def test_auto_is_also_compared_within_each_pass() -> None:
    # Two passes over the modes: in the first the machine was slow for sd's run, in the second for auto's.
    def group(mode: str, rates: list[float]) -> dict[str, object]:
        return {"scenario": "B", "setting": "greedy", "mode": mode, "runs": [_run("p", r) for r in rates]}
    groups = [group("ar", [10.0, 10.0]), group("sd", [10.0, 20.0]), group("auto", [18.0, 12.0])]
    (entry,) = per_prompt(groups)
    assert [round(r, 6) for r in entry["auto_vs_best_by_pass"]] == [1.8, 0.6]
    assert math.isclose(entry["auto_vs_best"], (200 / (100 / 18 + 100 / 12)) / (200 / (100 / 10 + 100 / 20)))
    (s,) = summary([entry])
    assert [round(p["geomean"], 6) for p in s["auto_vs_best_by_pass"]] == [1.8, 0.6]


def test_a_pass_that_decoded_nothing_neither_shifts_the_passes_nor_breaks_the_means() -> None:
    def group(mode: str, runs: list[dict[str, object]]) -> dict[str, object]:
        return {"scenario": "A", "setting": "sampled", "mode": mode, "runs": runs}
    nothing = {"prompt": "p", "tokens_per_second": 0.0, "decode_tokens": 0, "decode_s": 0.0}
    groups = [group("ar", [nothing, _run("p", 10.0)]), group("auto", [_run("p", 10.0), nothing])]
    (entry,) = per_prompt(groups)
    # no fixed mode decoded in the first pass, auto nothing in the second
    assert entry["auto_vs_best_by_pass"] == [None, 0.0]
    (s,) = summary([entry])
    assert s["auto_vs_best_by_pass"] == [None, {"geomean": 0.0, "lowest": 0.0}]


def test_auto_is_also_compared_with_the_one_fixed_mode_best_over_the_row() -> None:
    (s,) = summary(per_prompt(_groups()))
    # geometric means of tok/s: ar 10, sd sqrt(96) = 9.8, lookup sqrt(180) = 13.4: lookup, on both prompts
    assert s["best_mode"] == "lookup"
    assert math.isclose(s["auto_vs_best_mode"]["geomean"], math.sqrt(11.4 / 9.0))
    assert math.isclose(s["auto_vs_best_mode"]["lowest"], 1.0)
    no_auto = [g for g in _groups() if g["mode"] != "auto"]
    (s,) = summary(per_prompt(no_auto))
    assert s["best_mode"] == "lookup" and s["auto_vs_best_mode"] is None
