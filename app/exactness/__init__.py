"""Verify exactness in the app: its dialog and its wording (the check itself is engine code,
:mod:`engine.speculative.exactness`, run in the engine process)."""
