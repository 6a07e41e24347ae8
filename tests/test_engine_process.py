"""The engine process: the same tokens as the in-process engine, Stop within a round, and a native fault (SIGKILL,
SIGBUS, SIGABRT, a real ggml abort) that ends the child only, named, with a restart that answers again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import (
    ContextFullError,
    Engine,
    EngineConfig,
    EngineError,
    GenerationParams,
    ModelLoadError,
    SamplingParams,
    TinyPair,
    VerifyProgress,
)
from engine.native.abort import FAULT_ENV
from engine.process import EngineProcess, EngineStopped
from engine.process import protocol as p
from engine.process.faults import describe_exit, fault_line
from engine.process.runner import Backoff
from tests.process_helpers import pid_alive
from tests.server_helpers import wait_until

pytestmark = pytest.mark.timeout(180)

GREEDY = SamplingParams(temperature=0.0)


def config(tiny: TinyPair) -> EngineConfig:
    return EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=512, threads=1, draft_threads=1)


@pytest.fixture
def proc(tiny: TinyPair) -> Iterator[EngineProcess]:
    eng = EngineProcess(config(tiny))
    try:
        yield eng
    finally:
        pid = eng.pid
        eng.close()
        assert not pid_alive(pid), "the engine process outlived close()"


def test_tokens_equal_the_in_process_engine(proc: EngineProcess, tiny: TinyPair) -> None:
    with Engine(config(tiny)) as here:
        prompt = here.tokenize("The quick brown fox")
        assert proc.tokenize("The quick brown fox") == prompt
        for mode in ("ar", "sd", "ssd", "auto"):
            params = GenerationParams(mode=mode, max_tokens=40, sampling=GREEDY)
            want = list(here.generate(prompt, params).run().tokens)
            gen = proc.generate(prompt, params)
            got = [ev.token for ev in gen]
            assert got == want == gen.tokens, mode
            assert gen.stats.new_tokens == len(want) and gen.stats.finish_reason == "length"
            assert gen.stats.mode == mode
    assert proc.n_ctx == 512 and proc.placement.has_draft


def test_the_stats_count_every_token_as_it_comes(proc: EngineProcess) -> None:
    # Between two Stats events each Token carries its time: the count and the rate describe the tokens out so far,
    # so the app's line under a streaming reply never lags its text.
    prompt = proc.tokenize("Count with me")
    gen = proc.generate(prompt, GenerationParams(mode="sd", max_tokens=60, sampling=GREEDY))
    seen: list[tuple[int, int, float]] = []
    for n, _ev in enumerate(gen, 1):
        seen.append((n, gen.stats.new_tokens, gen.stats.seconds))
    assert len(seen) >= 20 and all(n == count for n, count, _ in seen)
    times = [s for _, _, s in seen]
    assert times == sorted(times) and times[0] > 0
    assert gen.stats.tokens_by_mode["sd"] >= len(seen) - 1 and gen.stats.seconds_by_mode["sd"] > 0


def test_a_round_crosses_the_pipe_in_one_message(proc: EngineProcess) -> None:
    # A 64-token sd reply on the related draft: one Round per round (the first token's included) and the Done,
    # where a message per token made 64 and more; every token arrives, marked with its round's end.
    prompt = proc.tokenize("Count with me")
    params = GenerationParams(mode="sd", max_tokens=64, sampling=GREEDY)
    rid, events = proc.child.request(lambda rid: p.Generate(rid, tuple(prompt), params))
    messages: list[object] = []
    while not isinstance(messages[-1] if messages else None, p.Done | p.Failed):
        messages.append(events.get(timeout=60))
    proc.child.forget(rid)
    rounds, done = messages[:-1], messages[-1]
    assert isinstance(done, p.Done) and all(isinstance(m, p.Round) for m in rounds)
    assert sum(len(m.tokens) for m in rounds if isinstance(m, p.Round)) == done.value.new_tokens == 64
    assert len(rounds) == done.value.rounds + 1 and len(messages) < 64 / 2
    gen = proc.generate(prompt, params)
    ends = [ev.ends_round for ev in gen]
    assert ends.count(True) == len(rounds) and ends[-1] and len(ends) == 64


def test_verify_exactness_runs_the_engines_check_and_the_process_runs_no_app_code(proc: EngineProcess) -> None:
    progress: list[VerifyProgress] = []
    params = GenerationParams(mode="sd", max_tokens=24, sampling=GREEDY)
    result = proc.verify_exactness([{"role": "user", "content": "Hello"}], params, threading.Event(), progress.append)
    assert result.identical and result.ar_tokens == result.spec_tokens == 24 and result.device == "CPU"
    assert [(r.pass_no, r.mode) for r in progress][-1] == (2, "sd")
    with pytest.raises(EngineError, match=r"not an engine task: app\.worker\.chat_setup:prepare"):
        proc.run_task("app.worker.chat_setup:prepare", (), threading.Event(), progress.append)


def test_stop_ends_the_generation_at_a_round(proc: EngineProcess) -> None:
    stop = threading.Event()
    gen = proc.generate(proc.tokenize("Hello"), GenerationParams(mode="ar", max_tokens=400, sampling=GREEDY), stop)
    n = 0
    for _ in gen:
        n += 1
        if n == 3:
            stop.set()
    assert 3 <= n < 400 and gen.stats.finish_reason == "stopped"
    assert len(list(proc.generate(proc.tokenize("Hi"), GenerationParams(mode="ar", max_tokens=5)))) == 5


@pytest.mark.parametrize(("sig", "said"), [
    (signal.SIGKILL, "killed by SIGKILL (ended by the system or another program, often for lack of memory)"),
    (signal.SIGBUS, "killed by SIGBUS (a model file was cut short or changed while in use): Fatal Python error: Bus"),
    (signal.SIGABRT, "killed by SIGABRT (llama.cpp stopped on an error): Fatal Python error: Aborted"),
])
def test_a_killed_engine_is_named_and_restarts(proc: EngineProcess, sig: signal.Signals, said: str) -> None:
    stopped: list[str] = []
    proc.on_stopped = stopped.append
    first = proc.pid
    params = GenerationParams(mode="sd", max_tokens=400, sampling=GREEDY)
    prompt = proc.tokenize("Once upon a time")
    got: list[int] = []
    with pytest.raises(EngineStopped) as err:
        for ev in proc.generate(prompt, params):
            got.append(ev.token)
            if len(got) == 4:
                os.kill(first, sig)
    assert str(err.value).startswith(f"the engine stopped: {said}")
    assert 4 <= len(got) < 400 and stopped and stopped[0] in str(err.value)
    assert not pid_alive(first) and not proc.alive and proc.state == "stopped"
    assert proc.tokenize("Once upon a time") == prompt  # the next request starts it again
    assert proc.pid != first and proc.alive and proc.restarts == 1 and proc.state == "ready"
    proc.restart()  # running: nothing to do
    assert proc.restarts == 1
    again = [ev.token for ev in proc.generate(prompt, params)]
    assert again[:len(got)] == got and len(again) == 400


def test_a_ggml_abort_is_named_by_its_message(tiny: TinyPair, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "abort:3")  # the child calls llama.cpp's own ggml_abort after 3 tokens
    with EngineProcess(config(tiny)) as eng, pytest.raises(EngineStopped) as err:
        list(eng.generate(eng.tokenize("Hello"), GenerationParams(mode="ar", max_tokens=50)))
    assert str(err.value) == ("the engine stopped: killed by SIGABRT (llama.cpp stopped on an error): "
                              "llama.cpp aborted: ssd-chat:0: test fault after 3 tokens")


def test_auto_restart_waits_and_loads_the_same_pair(tiny: TinyPair) -> None:
    with EngineProcess(config(tiny), auto_restart=True) as eng:
        first = eng.pid
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: eng.state == "restarting", "the engine is restarting")
        wait_until(lambda: eng.state == "ready" and eng.alive, "the engine restarted")
        assert eng.pid != first and eng.restarts == 1
        assert len(list(eng.generate(eng.tokenize("Hi"), GenerationParams(mode="ar", max_tokens=4)))) == 4


def test_load_errors_come_back_as_the_engines_own(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"this is not GGUF")
    with pytest.raises(ModelLoadError, match=r"not-a-model\.gguf"):
        EngineProcess(EngineConfig(str(bad)))


CHILD_OF_A_DYING_PARENT = """
import sys, time
from engine import EngineConfig
from engine.process import EngineProcess
if __name__ == "__main__":
    eng = EngineProcess(EngineConfig(sys.argv[1], n_ctx=256, threads=1))
    print(eng.pid, flush=True)
    time.sleep(600)
"""


def test_the_engine_process_ends_when_its_parent_is_killed(tiny: TinyPair, tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(CHILD_OF_A_DYING_PARENT)
    parent = subprocess.Popen([sys.executable, str(script), str(tiny.target)], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).parent.parent)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert pid_alive(child)
        parent.kill()
        parent.wait()
        wait_until(lambda: not pid_alive(child) or _zombie(child), "the orphaned engine process exits")
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


def _zombie(pid: int) -> bool:
    """An exited child not yet reaped by init (a container without one reaps late)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return False


@pytest.mark.parametrize(("code", "tail", "said"), [
    (-9, "", "killed by SIGKILL (ended by the system or another program, often for lack of memory)"),
    (-7, "x\nFatal Python error: Bus error\n\nThread 0x1 (most recent call first):\n  File ...",
     "killed by SIGBUS (a model file was cut short or changed while in use): Fatal Python error: Bus error"),
    (-11, "Fatal Python error: Bus error\n\nThread 0x1 (most recent call first):\n",  # a second fault mid-report
     "killed by SIGBUS (a model file was cut short or changed while in use): Fatal Python error: Bus error"),
    (-6, "llama.cpp aborted: rpc.cpp:12: Remote RPC server crashed\nFatal Python error: Aborted\n",
     "killed by SIGABRT (llama.cpp stopped on an error): llama.cpp aborted: rpc.cpp:12: Remote RPC server crashed"),
    (3, "ValueError: bad\n", "exited with code 3: ValueError: bad"),
    (None, "", "did not end"),
])
def test_a_childs_end_in_words(code: int | None, tail: str, said: str) -> None:
    assert describe_exit(code, tail) == said


def test_fault_line_halves_an_interleaved_report() -> None:
    assert fault_line("Fatal Python error: Illegal instructionIllegal instruction") == \
        "Fatal Python error: Illegal instruction"


def test_backoff_doubles_to_its_bound_and_resets_after_a_stable_run() -> None:
    b = Backoff(first_s=0.5, most_s=4.0, stable_s=3600.0)
    assert [b.next_delay() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    b.stable_s = 0.0
    assert b.next_delay() == 0.5


def test_messages_pickle_as_themselves() -> None:
    import pickle

    for msg in (p.Round(1, 3, (2, 5), ("a", "b"), (True, False), 0.5), p.Stop(p.ALL), p.Close(),
                p.Call(4, "tokenize", ("x",))):
        assert pickle.loads(pickle.dumps(msg)) == msg
    assert isinstance(p.error_of(p.Failed(1, "ContextFullError", "full", True)), ContextFullError)
    assert type(p.error_of(p.Failed(1, "KeyError", "KeyError: 1", False))) is EngineError


def test_generate_says_a_ggml_abort_in_one_line_and_exits_2(tiny: TinyPair) -> None:
    env = {**os.environ, FAULT_ENV: "abort:3"}  # generate keeps the engine in-process: llama.cpp's abort ends it
    r = subprocess.run([sys.executable, "-m", "engine", "generate", "--target", str(tiny.target), "--mode", "ar",
                        "--prompt", "Hello", "--max-tokens", "20", "--threads", "1"],
                       capture_output=True, text=True, env=env, timeout=120, check=False)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == \
        "error: the engine stopped: llama.cpp aborted: ssd-chat:0: test fault after 3 tokens"
    assert "Traceback" not in r.stderr and "Fatal Python error" not in r.stderr
