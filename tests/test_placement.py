"""GPU layers: auto placement from the GGUF header and a device's free memory, the text that says what was chosen,
and the warning where a fixed drafting mode cannot pay (draft on the CPU, target on the GPU)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from engine import (
    AUTO_LAYERS,
    GenerationStats,
    GpuDevice,
    ModelLoadError,
    drafting_warning,
    loaded_placement,
    place_layers,
)
from engine.cli.main import main
from engine.core.backend import Model
from engine.core.context import Context, ContextParams
from engine.core.placement import (
    DRAFT_EXTRA,
    HEADROOM,
    ModelSize,
    Placement,
    cannot_pay,
    plan_layers,
    probe_device,
    read_size,
)
from engine.native import offload, startup
from tests.tiny_models import TinyPair

GIB = 1 << 30


def _free_for(size: ModelSize, layers: int, n_ctx: int) -> int:
    """Free memory in which exactly ``layers`` of the model fit (with the headroom auto leaves)."""
    need = size.bytes_for(layers, n_ctx) + 1000
    return int(need / (1.0 - HEADROOM)) + 1


def test_auto_puts_every_layer_on_the_gpu_when_the_device_has_room(tiny: TinyPair) -> None:
    p = place_layers(tiny.target, tiny.draft_related, AUTO_LAYERS, AUTO_LAYERS, 512, GpuDevice(True, 8 * GIB))
    assert (p.target_layers, p.draft_layers) == (-1, -1)  # -1: every layer, the output layer too
    assert (p.target_on_gpu, p.draft_on_gpu) == (3, 3)
    assert p.text == "target 3/3 layers on the GPU, draft on the GPU"


def test_auto_puts_fewer_layers_when_the_device_is_short(tiny: TinyPair) -> None:
    size = read_size(tiny.target)
    p = place_layers(tiny.target, tiny.draft_related, AUTO_LAYERS, AUTO_LAYERS, 512,
                     GpuDevice(True, _free_for(size, 2, 512)))
    assert (p.target_layers, p.draft_layers) == (2, 0)  # the target first; nothing left for the draft
    assert p.text.startswith("target 2/3 layers on the GPU, draft on the CPU (auto: 0.")
    assert p.text.endswith(" GiB of GPU memory free)")
    none = place_layers(tiny.target, tiny.draft_related, AUTO_LAYERS, AUTO_LAYERS, 512, GpuDevice(True, 1 << 20))
    assert (none.target_layers, none.draft_layers) == (0, 0)
    assert none.text.startswith("target on the CPU, draft on the CPU (auto: ")


def test_the_draft_gets_what_the_whole_target_leaves(tiny: TinyPair) -> None:
    t, d = read_size(tiny.target), read_size(tiny.draft_related)
    free = int((t.bytes_for(t.n_layers, 512) + d.bytes_for(1, 512 + DRAFT_EXTRA)) / (1.0 - HEADROOM)) + 1
    p = place_layers(tiny.target, tiny.draft_related, AUTO_LAYERS, AUTO_LAYERS, 512, GpuDevice(True, free))
    assert (p.target_layers, p.draft_layers) == (-1, 1)
    assert p.text.startswith("target 3/3 layers on the GPU, draft 1/3 layers on the GPU (auto: ")


def test_a_cpu_build_places_nothing_and_says_so(tiny: TinyPair) -> None:
    p = place_layers(tiny.target, tiny.draft_related, AUTO_LAYERS, AUTO_LAYERS, 512, GpuDevice(False))
    assert (p.target_layers, p.draft_layers) == (0, 0)
    assert p.text == "CPU build: both models on the CPU"
    alone = place_layers(tiny.target, None, AUTO_LAYERS, AUTO_LAYERS, 512, GpuDevice(False))
    assert alone.text == "CPU build: the model on the CPU"


def test_this_build_is_the_cpu_one_and_auto_loads_no_layer(tiny: TinyPair) -> None:
    if offload.supports_gpu_offload():
        pytest.skip("this llama.cpp build can offload")
    assert probe_device() == GpuDevice(False)
    with Model(tiny.target, gpu_layers=AUTO_LAYERS) as target, Model(tiny.draft_related) as draft:
        assert target.gpu_layers == 0 and target.n_layers == 3
        p = loaded_placement(target, draft)
        assert p.text == "CPU build: both models on the CPU"
        with Context(target, ContextParams(n_ctx=128)) as ctx:
            assert not ctx.synchronizes  # a CPU decode has finished when it returns


def test_a_damaged_header_is_a_load_error_naming_the_file(tiny: TinyPair, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny.target.read_bytes()[:1000])
    with pytest.raises(ModelLoadError, match=r"^could not load the model .*cut\.gguf$"):
        place_layers(tiny.target, cut, AUTO_LAYERS, AUTO_LAYERS, 512, GpuDevice(True, 8 * GIB))


def test_a_number_overrides_auto() -> None:
    big = ModelSize(n_layers=28, layer_bytes=200 << 20, head_bytes=500 << 20, kv_bytes_per_token=1 << 14,
                    compute_bytes=400 << 20)
    small = ModelSize(24, 20 << 20, 100 << 20, 1 << 12, 100 << 20)
    roomy = GpuDevice(True, 80 * GIB)
    assert plan_layers(big, small, AUTO_LAYERS, AUTO_LAYERS, 4096, roomy).text == \
        "target 28/28 layers on the GPU, draft on the GPU"
    fixed = plan_layers(big, small, 10, 0, 4096, roomy)
    assert (fixed.target_layers, fixed.draft_layers) == (10, 0)
    assert fixed.text == "target 10/28 layers on the GPU, draft on the CPU"  # as set: no auto note
    assert plan_layers(big, small, -1, AUTO_LAYERS, 4096, roomy).draft_layers == -1
    assert plan_layers(big, small, 999, 0, 4096, roomy).target_on_gpu == 28


def test_read_size_counts_layers_and_kv(tiny: TinyPair) -> None:
    s = read_size(tiny.target)
    assert s.n_layers == 3
    assert s.kv_bytes_per_token == 4 * (16 + 16) * 2  # 4 KV heads, key and value 16 wide, F16
    assert s.layer_bytes > 0 and s.head_bytes > 0
    assert s.bytes_for(0, 512) == 0 < s.bytes_for(1, 512) < s.bytes_for(3, 512)


GPU_TARGET_CPU_DRAFT = Placement(-1, 0, 28, 24, True, True)


@pytest.mark.parametrize(("mode", "where", "draft_ms", "target_ms", "warned"), [
    ("ssd", GPU_TARGET_CPU_DRAFT, 30.0, 3.0, True),  # the tree on CPU cores against a GPU verify
    ("sd", GPU_TARGET_CPU_DRAFT, 3.0, 3.0, True),  # equal: every drafted token costs a whole step
    ("sd", GPU_TARGET_CPU_DRAFT, 1.0, 3.0, False),  # a draft faster than the target can pay
    ("auto", GPU_TARGET_CPU_DRAFT, 30.0, 3.0, False),  # auto picks what pays: nothing to warn of
    ("sd", Placement(-1, -1, 28, 24, True, True), 30.0, 3.0, False),  # both on the GPU
    ("sd", Placement(0, 0, 28, 24, True, True), 30.0, 3.0, False),  # both on the CPU
    ("sd", Placement(0, 0, 28, 24, False, True), 30.0, 3.0, False),  # a CPU build
])
def test_a_fixed_mode_that_cannot_pay_is_warned_of(mode: str, where: Placement, draft_ms: float, target_ms: float,
                                                   warned: bool) -> None:
    text = cannot_pay(mode, where, draft_ms / 1000, target_ms / 1000)
    assert (text is not None) == warned
    if text is not None:
        assert text.startswith(f"{mode} cannot pay here: the draft runs on the CPU at {draft_ms:.1f} ms a token")
        assert "mode auto picks what pays" in text


def test_the_warning_reads_a_replys_measured_times() -> None:
    stats = GenerationStats(mode="ssd", rounds=40, drafted=120, draft_decode_s=1.2, mean_verify_ms=3.3)
    text = drafting_warning(stats, GPU_TARGET_CPU_DRAFT)  # 10 ms a drafted token against a 3.3 ms step
    assert text is not None and "10.0 ms a token" in text and "(3.3 ms)" in text
    sd = GenerationStats(mode="sd", rounds=40, drafted=120, draft_wait_s=0.12, mean_verify_ms=3.3)
    assert drafting_warning(sd, GPU_TARGET_CPU_DRAFT) is None  # 1 ms a drafted token: it may pay
    early = GenerationStats(mode="ssd", rounds=2, drafted=6, draft_decode_s=1.0, mean_verify_ms=3.3)
    assert drafting_warning(early, GPU_TARGET_CPU_DRAFT) is None  # too few rounds to say


def test_generate_says_where_the_layers_run(tiny: TinyPair, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["generate", "--target", str(tiny.target), "--draft", str(tiny.draft_related), "--prompt", "Hello",
            "--max-tokens", "8", "--ctx", "256", "--mode", "sd"]
    assert main(args) == 0
    err = capsys.readouterr().err
    gpu = offload.supports_gpu_offload()
    assert ("target 3/3 layers on the GPU" if gpu else "[CPU build: both models on the CPU]") in err
    assert main([*args, "--json", "--gpu-layers", "none", "--draft-gpu-layers", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["placement"] == ("target on the CPU, draft on the CPU" if gpu else "CPU build: both models on the CPU")
    assert out["warning"] is None  # nothing on the GPU: nothing that cannot pay by construction


def test_a_bad_gpu_layers_value_is_a_usage_error(tiny: TinyPair, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["generate", "--target", str(tiny.target), "--prompt", "x", "--gpu-layers", "most"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == "error: argument --gpu-layers: expected auto, all, none or a number of layers, got 'most'"


def test_the_models_own_quirk_notes_stay_off_the_terminal(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="engine.llama_cpp")
    startup._log_callback(3, b"load: control-looking token: 128247 '</s>' was not control-type; this is probably "
                             b"a bug in the model. its type will be overridden\n", None)
    startup._log_callback(4, b"llama_model_load: error loading model: tensor data is not within file bounds\n", None)
    levels = [(r.levelno, r.getMessage().split(":")[1].strip()) for r in caplog.records]
    assert levels == [(logging.DEBUG, "control-looking token"), (logging.ERROR, "error loading model")]
