"""Every field of OpenAI's request bodies, and what this server does with it: honoured, honoured with a note,
ignored because it changes nothing here, or refused with a 400 that names it.

A field that would change the reply is never dropped without a word: it is honoured or refused. The tables are
the one list of them; docs/server.md's field table and the tests (which walk the installed ``openai`` client's
request types) are checked against it.
"""

from __future__ import annotations

from typing import Any

from .errors import APIError

HONOURED, NOTED, IGNORED, REFUSED = "honoured", "honoured with a note", "ignored", "refused"

_COMMON: dict[str, tuple[str, str]] = {
    "model": (NOTED, "must name the served model (404 otherwise), unless the server runs with --any-model-name"),
    "max_tokens": (NOTED, "default: the rest of the context; a larger value is capped at the context"),
    "temperature": (HONOURED, "0 to 2; 0 is greedy"),
    "top_p": (HONOURED, ""),
    "seed": (NOTED, "one seed gives one reply in every mode, auto included (coupled sampling, the default); "
             "system_fingerprint changes with the model files, llama.cpp's build or the scheme, when it may not"),
    "stop": (HONOURED, "up to 4 strings, cut from the reply"),
    "n": (NOTED, "1 to 16 choices, each a generation of its own, one after another; choice i samples with seed + i "
          "(mod 2**32), so choice 0 is the n=1 reply"),
    "stream": (HONOURED, ""),
    "stream_options": (HONOURED, "include_usage"),
    "logit_bias": (HONOURED, "token ids of the target's vocabulary, -100 to 100; applied to the target's "
                   "distribution and mirrored on the draft, so speculation stays exact"),
    "presence_penalty": (HONOURED, "-2 to 2, over the reply's tokens, as OpenAI defines it"),
    "frequency_penalty": (HONOURED, "-2 to 2, over the reply's tokens, as OpenAI defines it"),
    "user": (IGNORED, "an end-user id for OpenAI's abuse monitoring; changes no reply"),
}
CHAT: dict[str, tuple[str, str]] = {
    **_COMMON,
    "messages": (NOTED, "system, developer (as system), user, assistant (with tool_calls and reasoning_content), "
                 "tool and function roles; text content only"),
    "max_completion_tokens": (NOTED, "as max_tokens"),
    "response_format": (HONOURED, "text, json_object (a JSON object) and json_schema (strict or not, the schema is "
                        "enforced by a grammar; a keyword the grammar cannot enforce is refused by name)"),
    "tools": (NOTED, "function tools, rendered by the model's own chat template and parsed in its family's format "
              "(400 for a template whose format is not known: docs/families.md)"),
    "tool_choice": (NOTED, "none, auto, required, or a named function; required and named are forced by a grammar "
                    "and produce one call"),
    "parallel_tool_calls": (NOTED, "auto may return several calls; required and named return one"),
    "functions": (NOTED, "legacy: mapped onto tools; the reply carries function_call"),
    "function_call": (NOTED, "legacy: mapped onto tool_choice"),
    "logprobs": (NOTED, "the target's own log-probabilities (the raw logits row's log-softmax, before temperature, "
                 "bias or grammar) in every mode, from the rows its verification read; every reply token, thinking "
                 "included"),
    "top_logprobs": (HONOURED, "0 to 20; needs logprobs"),
    "audio": (REFUSED, "no audio output"),
    "modalities": (REFUSED, "text only: anything but [\"text\"] is refused"),
    "prediction": (REFUSED, "predicted outputs are not supported"),
    "web_search_options": (REFUSED, "no web search"),
    "verbosity": (REFUSED, "no verbosity control"),
    "moderation": (REFUSED, "no moderation"),
    "reasoning_effort": (NOTED, "passed to the chat template: GPT-OSS's effort; none or minimal switches thinking "
                         "off and low to high on where the template has only a switch (enable_thinking)"),
    "metadata": (IGNORED, "stored-completion bookkeeping; changes no reply"),
    "store": (IGNORED, "nothing is stored"),
    "service_tier": (IGNORED, "one tier"),
    "safety_identifier": (IGNORED, "OpenAI's abuse monitoring; changes no reply"),
    "prompt_cache_key": (IGNORED, "the prompt prefix is reused whenever it matches"),
    "prompt_cache_options": (IGNORED, "the prompt prefix is reused whenever it matches"),
    "prompt_cache_retention": (IGNORED, "the prompt prefix is reused whenever it matches"),
}
COMPLETIONS: dict[str, tuple[str, str]] = {
    **_COMMON,
    "max_tokens": (NOTED, "default 16, as OpenAI's; a larger value than the context holds is capped"),
    "prompt": (NOTED, "one string (or a list holding one)"),
    "suffix": (NOTED, "fill-in-the-middle with the model's FIM tokens (400 for a model without them)"),
    "echo": (REFUSED, "true is refused"),
    "logprobs": (NOTED, "0 to 5 alternatives per token, as chat's logprobs are computed"),
    "best_of": (REFUSED, "1 only"),
}
EXTENSIONS: dict[str, str] = {
    "mode": "ar, sd, ssd, lookup or auto: this request's speculation mode",
    "top_k": "0 (off) or the number of likeliest tokens sampled among",
    "min_p": "0 (off) to below 1",
    "chat_template_kwargs": "variables for the model's chat template (enable_thinking...), as llama.cpp and vLLM take",
    "thinking_budget": "the most thinking tokens: past it the thinking block is closed and the answer follows",
}

# The value of each refused field that asks for nothing (sent by clients that fill in every default).
_HARMLESS: dict[str, tuple[Any, ...]] = {
    "audio": (None,), "modalities": (None, ["text"]),
    "prediction": (None,), "web_search_options": (None,), "verbosity": (None,), "moderation": (None, False),
    "echo": (None, False), "best_of": (None, 1),
}


def refuse(data: dict[str, Any], table: dict[str, tuple[str, str]]) -> None:
    """A 400 naming the first refused field of a request body that asks for something."""
    for name, (status, why) in table.items():
        if status == REFUSED and name in data and data[name] not in _HARMLESS.get(name, (None,)):
            raise APIError(400, f"{name}: not supported by this server ({why})", param=name, code="unsupported_field")

# One line for the app's server panel: what a client can count on, and what is refused.
SUPPORTS = ("Chat and completions, streamed or whole; JSON mode and JSON schemas (exact under speculation); tool "
            "calls where the model's chat template has them; fill-in-the-middle on models with FIM tokens; "
            "logit bias and penalties; logprobs; n choices; embeddings; /v1/responses and Anthropic's "
            "/v1/messages. Refused with a 400: audio.")
