"""What the server sees of its engine: ready, or restarting after it stopped (and why), for /health and the 503s."""

from __future__ import annotations

from typing import Any

from .errors import APIError
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
