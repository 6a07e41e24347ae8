"""Speculation: the verifier, the drafter and its tree, the draft thread, the ar/sd/ssd steps, auto's planner."""
