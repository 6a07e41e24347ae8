"""Test-side access to the tiny model generator (the generator ships in ``engine.tiny.models``)."""

from engine.tiny.models import TinyPair, Vocab, extract_vocab, make_pair, small_vocab, spm_vocab, write_model

__all__ = ["TinyPair", "Vocab", "extract_vocab", "make_pair", "small_vocab", "spm_vocab", "write_model"]
