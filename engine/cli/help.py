"""Command-line help: every option's default shown, descriptions and epilogs kept as written."""

from __future__ import annotations

import argparse
import textwrap

from engine.core.options import ALL_LAYERS, AUTO_LAYERS

LAYERS_HELP = "auto: every layer that fits in free GPU memory, the target's first; all; none; or a number"
_LAYER_WORDS = {"auto": AUTO_LAYERS, "all": ALL_LAYERS, "none": 0}


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Ends each optional argument's help with its default: ``(default: 4)``, ``(default: off)`` for a flag,
    ``(default: none)`` where nothing is used unless given; help that already names its default is kept."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.required or not action.option_strings or "default" in text or action.default == argparse.SUPPRESS:
            return text
        if action.default is None:
            return f"{text} (default: none)"
        if action.default is False and action.nargs == 0:
            return f"{text} (default: off)"
        return super()._get_help_string(action)


def one_line(message: object) -> str:
    """``message`` as one printable line (no line breaks; characters the terminal cannot take escaped)."""
    return " ".join(str(message).split()).encode("utf-8", "backslashreplace").decode("utf-8")


def listing(title: str, items: dict[str, str], footer: str = "", width: int = 88) -> str:
    """An epilog: ``title:``, then each name and its text wrapped under it, then ``footer`` wrapped."""
    lines = [f"{title}:"]
    for name, text in items.items():
        lines.append(textwrap.fill(text, width, initial_indent=f"  {name:<3}", subsequent_indent=" " * 5))
    if footer:
        lines += ["", textwrap.fill(footer, width)]
    return "\n".join(lines)


def gpu_layers(text: str) -> int:
    """A --gpu-layers value: auto, all, none or a whole number (argparse's type; a bad one is a usage error)."""
    word = text.strip().lower()
    if word in _LAYER_WORDS:
        return _LAYER_WORDS[word]
    try:
        return int(word)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto, all, none or a number of layers, got {text!r}") from None
