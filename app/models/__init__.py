"""Models: the model manager, its workers and the active pair."""
