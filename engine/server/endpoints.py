"""The generating endpoints: /v1/chat/completions (tools, structured output), /v1/completions (FIM with
``suffix``) and /v1/responses (:mod:`.responses`)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import Response

from engine import ChatTemplateError, ParameterError
from engine.core.fim import suffix_head

from . import choices, embeddings, errors, replies, responses, responsestream
from .errors import APIError
from .job import MiddleEnd
from .schemas import ChatCompletionRequest, CompletionRequest
from .service import Service
from .structured import ChatPlan, chat_plan, sampling_extras


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
        done = await chat(service, request, chat_body)
        return responsestream.stream(body, service.model_id, done) if body.stream else responses.reply(body, done)

    @app.post("/v1/embeddings")
    async def create_embeddings(request: Request) -> Response:
        return await embeddings.create(service, request, await request.body())


async def chat(service: Service, request: Request, body: ChatCompletionRequest) -> Response:
    plan, prompt = await chat_prompt(service, body)
    extras = sampling_extras(body, plan.grammar, service.engine.n_vocab, plan.triggers)
    budget = min((b for b in (body.thinking_budget, service.config.thinking_budget) if b is not None), default=None)
    plan.thinking_budget = budget
    return await choices.serve(service, request, replies.CHAT, body, prompt, "messages", extras, plan)


async def chat_prompt(service: Service, body: ChatCompletionRequest) -> tuple[ChatPlan, list[int]]:
    """The plan of a chat request and its prompt's tokens (every problem a 400)."""
    service.check_model(body.model)
    await service.check_size([m.text for m in body.messages], "messages")
    template = service.config.chat_template
    fmt = await service.chat_format()
    if not fmt.has_template and template is None:
        raise APIError(400, "this model file has no chat template (it is likely a base model, trained on plain "
                       "text), so chat messages cannot be turned into its prompt: use /v1/completions with the "
                       "text itself, or start the server with --chat-template NAME|FILE", param="messages",
                       code="no_chat_template")
    plan = chat_plan(body, fmt)
    engine = service.engine
    try:
        prompt = await service.ask(engine.messages_tokens, plan.messages, plan.variables, template, plan.tools)
        plan.section = await service.ask(engine.reply_section, plan.messages, plan.variables, template, plan.tools)
    except (ChatTemplateError, ParameterError) as exc:  # e.g. a template that insists on alternating turns
        raise APIError(400, str(exc), param="messages", code="invalid_messages") from exc
    return plan, list(prompt)


async def complete(service: Service, request: Request, body: CompletionRequest) -> Response:
    service.check_model(body.model)
    await service.check_size([body.text, body.suffix or ""], "prompt")
    middle = None
    try:
        if body.suffix is not None:  # fill in the middle, between prompt and suffix
            prompt, ends = await service.ask(service.engine.fim_prompt, body.text, body.suffix)
            middle = MiddleEnd(ends, suffix_head(body.suffix))
        else:
            prompt = await service.ask(service.engine.tokenize, body.text)
    except ParameterError as exc:  # not UTF-8 (a lone surrogate escaped in the JSON), or no FIM tokens
        field = "suffix" if str(exc).startswith("suffix") else "prompt"
        raise APIError(400, str(exc), param=field, code="invalid_value") from exc
    extras = sampling_extras(body, "", service.engine.n_vocab)
    return await choices.serve(service, request, replies.TEXT, body, prompt, "prompt", extras, middle=middle)
