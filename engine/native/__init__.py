"""llama.cpp and ggml through ctypes, below everything else: the library's start-up and log routing
(:mod:`.startup`), ggml's symbols that llama-cpp-python does not wrap (:mod:`.symbols`), the CPU backend's
extra buffer types (:mod:`.bufts`), the RPC backend's registry and devices (:mod:`.rpc`) and ggml's abort
callback (:mod:`.abort`). Nothing here imports another package of the engine but :mod:`engine.errors`.
"""
