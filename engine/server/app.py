"""The FastAPI application: /health, /v1/models, and the generating endpoints (:mod:`.endpoints`)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from . import anthropic, endpoints, errors, messages
from .config import ServerConfig
from .gate import Gate
from .guard import BearerAuth, BodyLimit, HostGuard
from .health import engine_health, slot_health
from .job import ServedEngine
from .service import Service


def create_app(engine: ServedEngine, config: ServerConfig, gate: Gate | None = None) -> FastAPI:
    """The ASGI app for ``engine`` (already loaded); ``app.state.service`` holds its :class:`Service`."""
    service = Service(engine, config, gate or Gate(config.max_queue, engine.replies_at_once))
    app = FastAPI(title="ssd-chat local server", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service = service
    errors.install(app, on_error=service.gate.count_failure)
    # the last added runs first: Host and Origin, then CORS (preflights need no key), the key, the body's size
    app.add_middleware(BodyLimit, limit=config.max_body_bytes)
    if config.api_key:
        app.add_middleware(BearerAuth, key=config.api_key)
        app.add_middleware(anthropic.ApiKeyHeader)  # before the key's check: Anthropic's clients send x-api-key
    if config.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(config.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])
    app.add_middleware(HostGuard, bound=config.host, extra=config.allowed_hosts, origins=config.cors_origins)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        g = service.gate
        return {"status": "ok", "model": service.model_id, **engine_health(service.engine), "busy": g.busy,
                "queued": g.queued, "served": g.served, "slots": slot_health(service.engine, g)}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [service.model_card()]}

    @app.get("/v1/models/{model}")
    async def model(model: str) -> dict[str, Any]:
        service.check_model(model)
        return service.model_card()

    endpoints.add(app, service)
    messages.add(app, service)
    return app
