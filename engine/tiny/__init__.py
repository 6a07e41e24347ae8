"""Tiny generated GGUF models (transformer, recurrent, synthetic) for tests and benches."""
