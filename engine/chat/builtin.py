"""Chat templates written by the project, for models whose file has none, and the pick that fits a model."""

from __future__ import annotations

from pathlib import Path

from engine.core.backend import Model
from engine.errors import ParameterError

# Each template writes its markers as strings, so that trim_blocks and lstrip_blocks cannot change a newline.
CHATML = (
    "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + (m.content or '') + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
LLAMA3 = (
    "{{ bos_token }}{% for m in messages %}"
    "{{ '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + (m.content or '') | trim + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)
# Gemma and Mistral have no system turn: the system text opens the first user turn.
_SYSTEM_FIRST = (
    "{% set system = messages[0].content if messages and messages[0].role == 'system' else none %}"
    "{% set turns = messages[1:] if system is not none else messages %}"
)
GEMMA = (
    _SYSTEM_FIRST + "{{ bos_token }}{% for m in turns %}"
    "{% set text = (m.content or '') | trim %}"
    "{% if loop.first and system %}{% set text = system + '\\n\\n' + text %}{% endif %}"
    "{{ '<start_of_turn>' + ('model' if m.role == 'assistant' else 'user') + '\\n' + text + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)
MISTRAL = (
    _SYSTEM_FIRST + "{{ bos_token }}{% for m in turns %}"
    "{% set text = (m.content or '') | trim %}"
    "{% if loop.first and system %}{% set text = system + '\\n\\n' + text %}{% endif %}"
    "{% if m.role == 'assistant' %}{{ text + eos_token }}{% else %}{{ '[INST] ' + text + '[/INST]' }}{% endif %}"
    "{% endfor %}"
)
PHI3 = (
    "{% for m in messages %}{% set role = m.role if m.role in ('system', 'assistant') else 'user' %}"
    "{{ '<|' + role + '|>\\n' + (m.content or '') + '<|end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)
TEMPLATES = {"chatml": CHATML, "llama3": LLAMA3, "gemma": GEMMA, "mistral": MISTRAL, "phi3": PHI3}

# A marker the vocabulary holds as one token names the format the model was trained on; tried in this order.
MARKERS = (("<|im_start|>", "chatml"), ("<|start_header_id|>", "llama3"), ("<start_of_turn>", "gemma"),
           ("[INST]", "mistral"), ("<|assistant|>", "phi3"))
# Where no marker is in the vocabulary, an architecture whose models all chat in one format.
ARCHITECTURES = {"qwen2": "chatml", "qwen3": "chatml", "gemma": "gemma", "gemma2": "gemma", "gemma3": "gemma",
                 "phi3": "phi3"}
MAX_FILE_BYTES = 1 << 20  # a template file larger than this is not a chat template (the largest known are ~17 KB)


def suggest(model: Model) -> str | None:
    """The builtin template that fits ``model``'s vocabulary markers or architecture; None when nothing fits."""
    for marker, name in MARKERS:
        if len(model.tokenize(marker, add_special=False, parse_special=True)) == 1:
            return name
    return ARCHITECTURES.get(model.meta("general.architecture") or "")


def source(name_or_file: str) -> str:
    """The source of a builtin template (by name) or of a ``.jinja`` file (by path).

    Raises:
        ParameterError: Neither a builtin name nor a readable ``.jinja`` file of at most :data:`MAX_FILE_BYTES`.
    """
    if name_or_file in TEMPLATES:
        return TEMPLATES[name_or_file]
    path = Path(name_or_file).expanduser()
    names = ", ".join(TEMPLATES)
    if path.suffix != ".jinja":
        raise ParameterError(f"chat template {name_or_file!r}: not one of the builtin templates ({names}) and not "
                             "a .jinja file")
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ParameterError(f"chat template {str(path)!r} is larger than {MAX_FILE_BYTES:,} bytes")
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ParameterError(f"chat template {str(path)!r} is not UTF-8 text") from None
    except OSError as exc:
        raise ParameterError(f"chat template {str(path)!r} cannot be read: {exc.strerror or exc}") from None
