"""Several replies on one target context: a sequence each, their plain rounds made in one decode."""
