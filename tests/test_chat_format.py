"""Chat formats: which template renders a chat, what it offers, the project's builtin templates and their pick."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import NoChatTemplateError, ParameterError
from engine.chat import builtin, rendering
from engine.chat.families import by_name
from engine.chat.format import ChatFormat, chat_format, reply_section, template_format, thinking_variables
from engine.core.backend import Model
from engine.tiny.models import write_model
from tests.test_chat_render_matrix import SHAPES, Shape, compare, reference

TEMPLATES = Path("models") / "templates"
# vocabulary file -> the builtin its markers (or architecture) name
SUGGESTED = {"qwen2": "chatml", "qwen35": "chatml", "llama-bpe": "llama3", "phi-3": "phi3", "llama-spm": None,
             "gpt-2": None}


class _TwoTemplates:
    """A model whose GGUF holds a default template and a tool-use one (or neither)."""

    def __init__(self, default: str | None, tool_use: str | None) -> None:
        self.templates = {None: default, rendering.TOOL_USE: tool_use}

    def chat_template(self, name: str | None = None) -> str | None:
        return self.templates[name]


@pytest.mark.parametrize(("default", "tool_use", "tools", "expected"), [
    ("plain", "tooly", None, "plain"),
    ("plain", "tooly", [{"type": "function"}], "tooly"),
    ("plain", None, [{"type": "function"}], "plain"),
    (None, "tooly", None, "tooly"),
])
def test_the_tool_use_template_renders_chats_with_tools(default: str | None, tool_use: str | None,
                                                         tools: list[dict[str, str]] | None, expected: str) -> None:
    model = _TwoTemplates(default, tool_use)
    assert rendering.template_source(model, tools) == expected  # type: ignore[arg-type]
    assert rendering.template_source(model, tools, template="picked") == "picked"  # type: ignore[arg-type]


def test_a_model_without_a_template_says_so(tmp_path: Path) -> None:
    path = write_model(tmp_path / "base.gguf", seed=1, n_layer=1, chat_template="")
    with Model(path, vocab_only=True) as m:
        with pytest.raises(NoChatTemplateError, match=r"has no chat template.*base model.*--chat-template") as err:
            rendering.tokenize_chat(m, rendering.build_messages("hi"))
        assert "\n" not in str(err.value)
        assert chat_format(m) == ChatFormat("plain", "no chat template", False, False, False, False)
        picked = rendering.render(m, rendering.build_messages("hi"), template=builtin.source("chatml"))
        assert picked == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize("name", builtin.TEMPLATES)
def test_builtin_templates_render_as_the_reference(name: str) -> None:
    for shape in ("system+user", "turns", "tool call+result"):
        assert compare(builtin.TEMPLATES[name], SHAPES[shape]).kind == "match", shape


def test_builtin_templates_read_as_written() -> None:
    shape = Shape(({"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                   {"role": "assistant", "content": "A"}, {"role": "user", "content": "V"}))
    assert reference(builtin.GEMMA, shape) == ("<s><start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\nA"
                                               "<end_of_turn>\n<start_of_turn>user\nV<end_of_turn>\n"
                                               "<start_of_turn>model\n")
    assert reference(builtin.MISTRAL, shape) == "<s>[INST] S\n\nU[/INST]A</s>[INST] V[/INST]"
    assert reference(builtin.LLAMA3, shape).startswith("<s><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>")


@pytest.mark.parametrize(("vocab", "expected"), SUGGESTED.items())
def test_a_builtin_is_suggested_by_the_vocabulary(llama_src: Path, vocab: str, expected: str | None) -> None:
    with Model(llama_src / "models" / f"ggml-vocab-{vocab}.gguf", vocab_only=True) as m:
        assert builtin.suggest(m) == expected


def test_a_template_source_is_a_name_or_a_jinja_file(tmp_path: Path) -> None:
    f = tmp_path / "mine.jinja"
    f.write_text("{{ messages[0].content }}", encoding="utf-8")
    assert builtin.source(str(f)) == "{{ messages[0].content }}"
    with pytest.raises(ParameterError, match="not one of the builtin templates \\(chatml, llama3"):
        builtin.source("vicuna")
    with pytest.raises(ParameterError, match="cannot be read"):
        builtin.source(str(tmp_path / "missing.jinja"))
    f.write_bytes(b"\xff\xfe")
    with pytest.raises(ParameterError, match="not UTF-8"):
        builtin.source(str(f))


@pytest.mark.parametrize(("template", "family", "thinking", "effort", "tools"), [
    ("Qwen-Qwen3-0.6B", "hermes", True, False, True),
    ("openai-gpt-oss-120b", "gpt_oss", False, True, True),
    ("deepseek-ai-DeepSeek-V3.1", "deepseek_v31", True, False, False),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "hermes", False, False, True),
    ("google-gemma-2-2b-it", "plain", False, False, False),
])
def test_the_format_of_real_templates(llama_src: Path, template: str, family: str, thinking: bool, effort: bool,
                                      tools: bool) -> None:
    fmt = template_format((llama_src / TEMPLATES / f"{template}.jinja").read_text(encoding="utf-8"))
    assert (fmt.family, fmt.thinking_switch, fmt.effort_switch, fmt.tools) == (family, thinking, effort, tools)


def test_thinking_variables_follow_the_family_and_the_template() -> None:
    qwen = ChatFormat("hermes", "Qwen", True, True, False, True)
    assert thinking_variables(qwen, False, "high") == {"enable_thinking": False}
    assert thinking_variables(qwen, None, None) == {}
    v31 = by_name("deepseek_v31")
    assert v31 is not None and thinking_variables(v31, True, None) == {v31.thinking_key or "": True}
    oss = ChatFormat("gpt_oss", "GPT-OSS", True, False, True, True)
    assert thinking_variables(oss, True, "low") == {"reasoning_effort": "low"}


def test_a_reply_starts_in_thinking_where_the_prompt_opened_it(llama_src: Path) -> None:
    qwq = (llama_src / TEMPLATES / "Qwen-QwQ-32B.jinja").read_text(encoding="utf-8")
    qwen3 = (llama_src / TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")
    with Model(llama_src / "models" / "ggml-vocab-qwen2.gguf", vocab_only=True) as m:
        ask = rendering.build_messages("hi")
        assert reply_section(m, ask, {"enable_thinking": True}, template=qwq) == "thinking"
        assert reply_section(m, ask, template=qwq) == "content"  # this QwQ closes the block unless asked to think
        assert reply_section(m, ask, template=qwen3) == "content"
        assert reply_section(m, ask, {"enable_thinking": False}, template=qwen3) == "content"


def test_only_the_needed_files_of_the_sdist_are_unpacked(tmp_path: Path) -> None:
    import io
    import tarfile

    from tests import sdist

    archive = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("vendor/llama.cpp/models/templates/a.jinja", "vendor/llama.cpp/models/ggml-vocab-x.gguf",
                     "vendor/llama.cpp/tests/test-chat.cpp", "vendor/llama.cpp/src/llama.cpp", "setup.py"):
            info = tarfile.TarInfo(f"llama_cpp_python-0.3.36/{name}")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    sdist._unpack(archive, tmp_path / "out")
    found = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert found == ["models/ggml-vocab-x.gguf", "models/templates/a.jinja", "tests/test-chat.cpp"]
