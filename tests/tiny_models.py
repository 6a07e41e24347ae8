"""Test-side access to the tiny model generator (the generator ships in ``engine.tinymodel``)."""

from engine.tools.tinymodel import TinyPair, Vocab, extract_vocab, make_pair, small_vocab, spm_vocab, write_model

__all__ = ["TinyPair", "Vocab", "extract_vocab", "make_pair", "small_vocab", "spm_vocab", "write_model"]
