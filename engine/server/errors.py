"""OpenAI-style error replies: ``{"error": {"message", "type", "param", "code"}}``, never a traceback."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger(__name__)

Body = TypeVar("Body", bound=BaseModel)

_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
          405: "invalid_request_error", 413: "invalid_request_error", 422: "invalid_request_error",
          429: "rate_limit_error"}


class APIError(Exception):
    """An error reply: HTTP ``status``, a message naming the problem, and the request field at fault."""

    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        kind = _TYPES.get(self.status, "server_error" if self.status >= 500 else "invalid_request_error")
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def param_name(loc: Sequence[int | str]) -> str | None:
    """``("body", "messages", 0, "role")`` -> ``"messages[0].role"``."""
    out = ""
    for part in loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or None


def validation_error(errors: Sequence[Any]) -> APIError:
    """The reply for pydantic's first complaint about a request body."""
    if not errors:
        return APIError(400, "the request body is invalid")
    first = errors[0]
    kind = str(first.get("type", ""))
    if kind == "json_invalid":
        detail = first.get("ctx", {}).get("error", "")
        return APIError(400, f"malformed JSON in the request body{': ' + str(detail) if detail else ''}",
                        code="invalid_json")
    loc = tuple(first.get("loc", ()))
    param = param_name(loc)
    msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    if kind == "too_short" and first.get("input") in ([], ""):
        return APIError(400, f"{param} must not be empty", param=param, code="invalid_value")
    if kind == "missing":
        return APIError(400, f"{param} is required", param=param, code="missing_field")
    if param is None:
        return APIError(400, f"the request body must be a JSON object ({msg})", code="invalid_body")
    shown = "" if kind.startswith("value_error") or "input" not in first else f" (got {first['input']!r:.80})"
    return APIError(400, f"{param}: {msg}{shown}", param=param, code="invalid_value")


def parse_body(raw: bytes, model: type[Body]) -> Body:
    """Decode a JSON object and validate it as ``model``; every problem is a 400 naming the field."""
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise APIError(400, f"malformed JSON in the request body: {exc}", code="invalid_json") from None
    except RecursionError:
        raise APIError(400, "the request body's JSON is nested too deeply", code="invalid_json") from None
    if not isinstance(data, dict):
        raise APIError(400, f"the request body must be a JSON object, got {type(data).__name__}", code="invalid_body")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc.errors()) from None
    except RecursionError:
        raise APIError(400, "the request body's JSON is nested too deeply", code="invalid_json") from None


def install(app: FastAPI, on_error: Any = None) -> None:
    """Turn every failure into an OpenAI-style JSON reply; ``on_error()`` counts them."""

    def _count() -> None:
        if on_error is not None:
            on_error()

    @app.exception_handler(APIError)
    async def _api(request: Request, exc: APIError) -> JSONResponse:
        _count()
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        _count()
        return validation_error(list(exc.errors())).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return APIError(404, f"no such endpoint: {request.method} {request.url.path}", code="not_found").response()
        return APIError(exc.status_code, str(exc.detail), headers=dict(exc.headers or {})).response()

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        _count()
        return APIError(500, f"internal error: {type(exc).__name__}", code="internal_error").response()
