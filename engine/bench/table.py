"""The bench's summary table: one row per scenario, setting and mode, from the per-prompt runs.

Two rates per row: ``tok/s`` counts decoding after the first token (prefill and the first token
left out, as llama.cpp's tools report their eval speed), ``e2e`` counts every new token over the
whole reply, prefill included (what the chat's readout shows).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .common import Row


def summarise(rows: list[Row], exact: list[dict[str, Any]]) -> list[dict[str, Any]]:
    base = {(r.scenario, r.setting): r.tps for r in rows if r.mode == "ar"}
    table = []
    for r in rows:
        ar = base.get((r.scenario, r.setting))
        same = [e[r.mode]["identical"] for e in exact if e["scenario"] == r.scenario and r.mode in e]
        seconds = r.total("seconds")
        table.append({
            "scenario": r.scenario, "setting": r.setting, "mode": r.mode, "tokens_per_second": r.tps,
            "e2e_tokens_per_second": r.total("new_tokens") / seconds if seconds > 0 else None,
            "speedup_vs_ar": r.tps / ar if ar else None, "acceptance_rate": r.mean("acceptance_rate"),
            "mean_accepted": r.mean("mean_accepted"), "hit_rate": r.mean("hit_rate"),
            "python_share": r.mean("python_share"),
            "exact_vs_ar": (f"{sum(same)}/{len(same)}" if same and r.setting == "greedy" else None),
        })
    return table


def print_table(table: list[dict[str, Any]]) -> None:
    def f(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    head = f"{'scenario':8} {'setting':8} {'mode':26} {'tok/s':>7} {'e2e':>7} {'vs ar':>6} {'accept':>7} " \
           f"{'mean acc':>8} {'hit':>5} {'py%':>5} {'exact':>6}"
    print(head)
    print("-" * len(head))
    for t in table:
        print(f"{t['scenario']:8} {t['setting']:8} {t['mode']:26} {t['tokens_per_second']:7.2f} "
              f"{f(t.get('e2e_tokens_per_second'), '7.2f')} {f(t['speedup_vs_ar'], '6.2f')} "
              f"{f(t['acceptance_rate'], '7.0%')} {f(t['mean_accepted'], '8.2f')} "
              f"{f(t['hit_rate'], '5.0%')} {f(t['python_share'], '5.1%')} {t['exact_vs_ar'] or '-':>6}")
