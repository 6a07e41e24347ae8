"""A local OpenAI-compatible HTTP server over one loaded engine (FastAPI + uvicorn).

In-process use (the app's "Local server" switch)::

    from engine.server import LocalServer, ServerConfig
    server = LocalServer(engine, ServerConfig(port=8080, api_key=None))
    server.start()            # background thread; ServerError if the port is taken
    server.status()           # ServerStatus: url, served, running, queued, rejected, failed
    server.stop()

``ModelFiles`` and ``remember_model_files`` (the model files' size and time at load, checked before each
generation) are the engine core's, offered here for the app's worker. Names are imported lazily, so
``add_serve_parser`` costs the CLI nothing until ``serve`` runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.core.modelfile import ModelFiles
    from engine.core.modelfile import remember as remember_model_files

    from .app import create_app
    from .cli import add_serve_parser, cmd_serve
    from .config import FinishedRequest, RunningRequest, ServerConfig, ServerStatus
    from .local import LocalServer, ServerError

_WHERE = {
    "FinishedRequest": "config", "LocalServer": "local", "RunningRequest": "config", "ServerConfig": "config",
    "ServerError": "local", "ServerStatus": "config", "add_serve_parser": "cli", "cmd_serve": "cli",
    "create_app": "app", "ModelFiles": "engine.core.modelfile",
    "remember_model_files": "engine.core.modelfile:remember",
}

__all__ = ["FinishedRequest", "LocalServer", "ModelFiles", "RunningRequest", "ServerConfig", "ServerError",
           "ServerStatus", "add_serve_parser", "cmd_serve", "create_app", "remember_model_files"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        module, _, attr = _WHERE[name].partition(":")
        where = module if "." in module else f"{__name__}.{module}"
        return getattr(importlib.import_module(where), attr or name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
