"""The engine thread: its worker, its host on the UI thread and the worker boundary."""
