"""The benches: one module a scenario (the table and JSON each writes), common.py below them holds what they share."""
