"""The exactness check: greedy ar against the speculative mode, its dialog and its wording."""
