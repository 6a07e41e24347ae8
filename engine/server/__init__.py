"""A local OpenAI-compatible HTTP server over one loaded engine (FastAPI + uvicorn).

In-process use (the app's "Local server" switch)::

    from engine.server import LocalServer, ServerConfig
    server = LocalServer(engine, ServerConfig(port=8080, api_key=None))
    server.start()            # background thread; ServerError if the port is taken
    server.status()           # ServerStatus: url, served, running, queued, rejected, failed
    server.stop()

Names are imported lazily: importing the package costs nothing until a name is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .config import FinishedRequest, RunningRequest, ServerConfig, ServerStatus
    from .fields import SUPPORTS
    from .local import LocalServer, ServerError

_WHERE = {
    "FinishedRequest": "config", "LocalServer": "local", "RunningRequest": "config", "ServerConfig": "config",
    "ServerError": "local", "ServerStatus": "config", "create_app": "app", "SUPPORTS": "fields",
}

__all__ = ["SUPPORTS", "FinishedRequest", "LocalServer", "RunningRequest", "ServerConfig", "ServerError",
           "ServerStatus", "create_app"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
