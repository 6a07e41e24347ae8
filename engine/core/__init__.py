"""The core: llama.cpp wrappers (model, context), errors, sampling, the vocabulary rule, chat, paths, settings."""
