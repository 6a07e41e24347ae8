"""Tools: the ``python -m engine`` command line, the benchmark, the models commands and the tiny-model generator."""
