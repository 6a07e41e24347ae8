"""What the server sees of its engine: ready, or restarting after it stopped (and why), for /health and the 503s."""

from __future__ import annotations

from typing import Any

from .errors import APIError
from .gate import Gate
from .job import ServedEngine, engine_state


def engine_health(engine: ServedEngine) -> dict[str, Any]:
    """/health's engine fields: its state, and while it is not ready why it stopped and why a start failed."""
    state = engine_state(engine)
    if state == "ready":
        return {"engine": state}
    return {"engine": state, "cause": getattr(engine, "cause", ""), "start_error": getattr(engine, "start_error", "")}


def check_engine(engine: ServedEngine, retry_after_s: int) -> None:
    """503 while the engine process is being started again: Retry-After is the supervisor's next start; once a
    start has failed, the reply gives its cause rather than "retry shortly"."""
    if engine_state(engine) == "ready":
        return
    cause = getattr(engine, "cause", "")
    retry = str(getattr(engine, "retry_after_s", retry_after_s))
    failed = getattr(engine, "start_error", "")
    if failed:
        raise APIError(503, f"the engine stopped ({cause}) and could not be started again: {failed}",
                       code="engine_down", headers={"Retry-After": retry})
    raise APIError(503, f"the engine is restarting after it stopped ({cause}); retry shortly",
                   code="engine_restarting", headers={"Retry-After": retry})


def slot_health(engine: ServedEngine, gate: Gate) -> list[dict[str, Any]]:
    """/health's reply places: each busy with its request's tokens so far and rate, or idle (the requests in
    arrival order on the engine's sequences, which the engine assigns by prefix)."""
    running = sorted(gate.all_running, key=lambda r: r.started)
    out: list[dict[str, Any]] = []
    for i in range(gate.places):
        if i < len(running):
            r = running[i]
            out.append({"slot": i, "busy": True, "request": r.id, "mode": r.mode,
                        "completion_tokens": r.completion_tokens,
                        "tokens_per_second": round(r.tokens_per_second, 2)})
        else:
            out.append({"slot": i, "busy": False})
    return out
