"""``python -m engine``: every command of the engine's command line (generate, models, serve, bench, rpc-server,
chat-format); :mod:`.main` builds the parser and runs the one asked for."""
