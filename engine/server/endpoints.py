"""The generating endpoints: /v1/chat/completions (tools, structured output), /v1/completions (FIM with
``suffix``) and /v1/responses (:mod:`.responses`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.responses import Response

from engine import ChatTemplateError, ParameterError
from engine.core.chat import tokenize_chat
from engine.core.fim import fim_tokens

from . import errors, replies, responses
from .errors import APIError
from .schemas import ChatCompletionRequest, CompletionRequest
from .structured import chat_plan, sampling_extras, uses_tools

if TYPE_CHECKING:
    from .app import Service


def add(app: FastAPI, service: Service) -> None:
    """Register the generating endpoints on ``app``."""

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await chat(service, request, errors.parse_body(await request.body(), ChatCompletionRequest))

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await complete(service, request, errors.parse_body(await request.body(), CompletionRequest))

    @app.post("/v1/responses")
    async def create_response(request: Request) -> Response:
        body = errors.parse_body(await request.body(), responses.ResponsesRequest)
        chat_body = responses.chat_request(body)
        return responses.reply(body, await chat(service, request, chat_body))


async def chat(service: Service, request: Request, body: ChatCompletionRequest) -> Response:
    service.check_model(body.model)
    await service.check_size([m.text for m in body.messages], "messages")
    tooled = uses_tools(body)
    model = await service.ask(service.vocab.get) if tooled or body.logit_bias else None
    plan = chat_plan(body, model.chat_template() if model is not None else None)
    try:
        if tooled and model is not None:  # tools and tool turns are rendered here, with the template's own markup
            prompt = await service.ask(tokenize_chat, model, plan.messages, plan.tools)
        else:
            prompt = await service.ask(service.engine.messages_tokens, plan.messages)
    except (ChatTemplateError, ParameterError) as exc:  # e.g. a template that insists on alternating turns
        raise APIError(400, str(exc), param="messages", code="invalid_messages") from exc
    extras = sampling_extras(body, plan.grammar, model.n_vocab if model is not None else 0)
    return await service.serve(request, replies.CHAT, body, prompt, "messages", extras, plan)


async def complete(service: Service, request: Request, body: CompletionRequest) -> Response:
    service.check_model(body.model)
    await service.check_size([body.text, body.suffix or ""], "prompt")
    model = await service.ask(service.vocab.get) if body.suffix is not None or body.logit_bias else None
    try:
        if body.suffix is not None and model is not None:  # fill in the middle, between prompt and suffix
            prompt = await service.ask(fim_tokens, model, body.text, body.suffix)
        else:
            prompt = await service.ask(service.engine.tokenize, body.text)
    except ParameterError as exc:  # not UTF-8 (a lone surrogate escaped in the JSON), or no FIM tokens
        field = "suffix" if str(exc).startswith("suffix") else "prompt"
        raise APIError(400, str(exc), param=field, code="invalid_value") from exc
    extras = sampling_extras(body, "", model.n_vocab if model is not None else 0)
    return await service.serve(request, replies.TEXT, body, prompt, "prompt", extras)
