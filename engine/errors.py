"""Exceptions the engine raises for problems a user can fix."""

from __future__ import annotations


class EngineError(Exception):
    """Base of every user-facing engine error; the message is one plain line."""


class ModelLoadError(EngineError):
    """A model file is missing, truncated, not GGUF, or llama.cpp refused it."""


class VocabMismatchError(EngineError):
    """The draft's vocabulary does not match the target's (llama.cpp's pairing rule)."""


class ContextFullError(EngineError):
    """The prompt plus the requested tokens do not fit the context."""


class ParameterError(EngineError):
    """A generation or engine parameter is out of range."""


class DecodeError(EngineError):
    """llama_decode failed."""


class ChatTemplateError(EngineError):
    """The model's chat template failed: a syntax error, an error it raises, a forbidden operation, or too long."""


class NoChatTemplateError(ChatTemplateError):
    """The model file has no chat template (a base model) and none was picked for it: it cannot chat."""


class DiskFullError(EngineError):
    """A file could not be written because the disk (or the user's quota) is full."""


class ModelFileChangedError(ModelLoadError):
    """A loaded model's file was changed, cut short or removed on disk: generating could read past its end."""


class PrefillStopped(Exception):
    """A stop was asked between a prompt's chunks; the first ``decoded`` tokens are in the KV (not an error)."""

    def __init__(self, decoded: int) -> None:
        super().__init__(f"stopped after {decoded} prompt tokens")
        self.decoded = decoded
