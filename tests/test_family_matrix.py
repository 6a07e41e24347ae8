"""Each family on a tiny model built from a real vocabulary and its real template (random weights): the chat
prompt renders and tokenizes, its family is detected, greedy decoding is token-identical to ar in every mode, and
the reply splits with no marker left in its content or thinking."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import Engine, EngineConfig, GenerationParams
from engine.chat.families import detect
from engine.chat.family import CONTENT, THINKING
from engine.chat.stream import ReplySplitter, split_whole
from engine.core.sampling import SamplingParams
from engine.speculative.exactness import first_difference
from engine.tiny.synthetic import Shape, cached_tokenizer, write_llama

pytestmark = pytest.mark.long

N_TOKENS = 24
TARGET, DRAFT = Shape(n_layer=2, n_embd=32, n_head=2, n_head_kv=2, n_ff=64), Shape(n_layer=1, n_embd=32, n_head=2,
                                                                                       n_head_kv=2, n_ff=64)
# (family, the nearest real vocabulary in the sdist, a real template of the family)
CASES = [
    ("hermes", "qwen2", "Qwen-Qwen3-0.6B.jinja"),
    ("qwen3_coder", "qwen35", "Qwen3.5-4B.jinja"),
    ("llama3", "llama-bpe", "meta-llama-Llama-3.1-8B-Instruct.jinja"),
    ("mistral", "llama-spm", "mistralai-Mistral-Nemo-Instruct-2407.jinja"),
    ("gpt_oss", "gpt-2", "openai-gpt-oss-120b.jinja"),
    ("deepseek_r1", "deepseek-llm", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"),
    ("deepseek_v31", "deepseek-llm", "deepseek-ai-DeepSeek-V3.1.jinja"),
    ("gemma4", "gemma-4", "google-gemma-4-31B-it.jinja"),
    ("command_r", "command-r", "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"),
    ("glm45", "qwen2", "GLM-4.6.jinja"),
    ("kimi_k2", "qwen2", "moonshotai-Kimi-K2.jinja"),
    ("lfm2", "gpt-2", "LFM2-8B-A1B.jinja"),
    ("granite", "starcoder", "ibm-granite-granite-3.3-2B-Instruct.jinja"),
]
MODES = [GenerationParams(mode="sd", k=3), GenerationParams(mode="ssd", k=3, fanout=2),
         GenerationParams(mode="lookup"), GenerationParams(mode="auto", k=3)]
MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hello twice."}]


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def family_pair(request: pytest.FixtureRequest, llama_src: Path,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Engine]]:
    family, vocab, template_name = request.param
    models = llama_src / "models"
    template = (models / "templates" / template_name).read_text(encoding="utf-8")
    folder = tmp_path_factory.mktemp(f"family-{family}")
    cache = tmp_path_factory.getbasetemp() / "vocab-cache" / f"{vocab}.json"  # a vocabulary read once a session
    tok = dataclasses.replace(cached_tokenizer(models / f"ggml-vocab-{vocab}.gguf", cache), template=template)
    target = write_llama(folder / "target.gguf", tok, TARGET, seed=7)
    draft = write_llama(folder / "draft.gguf", tok, DRAFT, seed=7)
    with Engine(EngineConfig(str(target), str(draft), n_ctx=2048)) as eng:  # Command R's template alone is 550 tokens
        yield family, template, eng


def test_family_is_detected_and_prompt_renders(family_pair: tuple[str, str, Engine]) -> None:
    family, template, eng = family_pair
    assert detect(template).name == family
    assert eng.chat_format().family == family
    prompt = eng.messages_tokens(MESSAGES)
    assert "Say hello twice." in eng.detokenize(prompt)


def test_turn_ends_end_the_reply(family_pair: tuple[str, str, Engine]) -> None:
    family, template, eng = family_pair
    model = eng.target_model
    for text in detect(template).end_texts:
        toks = model.tokenize(text, add_special=False, parse_special=True)
        if len(toks) == 1:  # a turn end the vocabulary holds as one token ends generation (never shown)
            assert model.is_eog(toks[0]), (family, text)


def test_greedy_identical_to_ar_in_every_mode(family_pair: tuple[str, str, Engine]) -> None:
    family, _, eng = family_pair
    prompt = eng.messages_tokens(MESSAGES)
    ref = eng.generate(prompt, GenerationParams(mode="ar", max_tokens=N_TOKENS)).run()
    for base in MODES:
        got = eng.generate(prompt, dataclasses.replace(base, max_tokens=N_TOKENS)).run()
        assert got.tokens == ref.tokens, f"{family} {base.mode}: diverges at {first_difference(got.tokens, ref.tokens)}"


UNIT = {"type": "function", "function": {"name": "set_unit", "description": "Set the unit", "parameters": {
    "type": "object", "properties": {"unit": {"enum": ["c", "f"]}}, "required": ["unit"]}}}
CALL_TOKENS = 96  # room for one forced call in the most verbose markup


def test_a_forced_call_is_the_same_in_every_mode_and_parses(family_pair: tuple[str, str, Engine]) -> None:
    """tool_choice required: the family's call grammar holds the reply; every mode gives ar's tokens, and the
    family's parser reads them back as a call of the tool."""
    family, template, eng = family_pair
    fam = detect(template)
    if fam.call_grammar is None:
        pytest.skip(f"{family} has no call grammar")
    grammar = fam.call_grammar([UNIT], None)
    prompt = eng.messages_tokens(MESSAGES, tools=[UNIT])
    section = eng.reply_section(MESSAGES, tools=[UNIT])

    def run(mode: str) -> list[int]:
        params = GenerationParams(mode=mode, k=3, max_tokens=CALL_TOKENS,
                                  sampling=SamplingParams(temperature=0.0, grammar=grammar))
        return eng.generate(prompt, params).run().tokens

    ref = run("ar")
    for mode in ("sd", "ssd", "auto"):
        got = run(mode)
        assert got == ref, f"{family} {mode}: diverges at {first_difference(got, ref)}"
    text = b"".join(eng.target_model.token_bytes(t, special=True) for t in ref).decode("utf-8", "replace")
    _, _, calls = split_whole(fam, text, ["set_unit"], section)
    assert [c.name for c in calls] == ["set_unit"], (family, text)
    assert json.loads(calls[0].arguments)["unit"] in ("c", "f")


def test_reply_splits_without_markers(family_pair: tuple[str, str, Engine]) -> None:
    family, template, eng = family_pair
    fam = detect(template)
    prompt = eng.messages_tokens(MESSAGES)
    gen = eng.generate(prompt, GenerationParams(mode="ar", max_tokens=N_TOKENS))
    splitter = ReplySplitter(fam, ("get_weather",), eng.reply_section(MESSAGES))
    pieces = [p for ev in gen for p in splitter.feed(ev.text)]
    rest, _ = splitter.finish()
    markers = {m for rules in fam.transitions.values() for m, _ in rules}
    for p in [*pieces, *rest]:
        assert p.kind in (CONTENT, THINKING)
        assert not any(m in p.text for m in markers), (family, p)
