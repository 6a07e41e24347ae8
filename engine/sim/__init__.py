"""Deterministic simulations of the planner on modelled machines, and replay of recorded rounds."""
