"""Start-up: the first pair, crash handling, platform checks, notes from the last run, the self-test."""
