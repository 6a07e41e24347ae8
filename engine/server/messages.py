"""The routes of Anthropic's Messages API: ``/v1/messages`` (:mod:`.anthropic`, streamed by :mod:`.anthropicstream`)
and ``/v1/messages/count_tokens``; every error in Anthropic's shape."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from . import anthropic, anthropicstream
from .endpoints import chat, chat_prompt
from .errors import APIError
from .service import Service


def add(app: FastAPI, service: Service) -> None:
    """Register the Messages API's routes on ``app``."""

    @app.post(anthropic.MESSAGES_PATHS[0])
    async def messages(request: Request) -> Response:
        try:
            body = anthropic.parse(await request.body())
            assert isinstance(body, anthropic.MessagesRequest)
            done = await chat(service, request, anthropic.chat_request(body))
        except APIError as exc:
            service.gate.count_failure()
            return anthropic.error_response(exc)
        run = getattr(request.state, "run", None)
        if body.stream:
            return anthropicstream.stream(service.model_id, done, run)
        return anthropic.reply(body, done, run.stop_hit(0) if run is not None else None)

    @app.post(anthropic.MESSAGES_PATHS[1])
    async def count_tokens(request: Request) -> Response:
        try:
            body = anthropic.parse(await request.body(), count=True)
            _, prompt = await chat_prompt(service, anthropic.chat_request(body))
        except APIError as exc:
            service.gate.count_failure()
            return anthropic.error_response(exc)
        return JSONResponse({"input_tokens": len(prompt)})
