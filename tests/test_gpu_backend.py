"""The gpu backend: measured step time, the recording's time axis, the swap-space translation,
build errors, arrival stamps and the offline smoke model.

Everything that can run on a CPU does (through the sim backend and vLLM's own code paths); the
tests that need CUDA are marked `gpu` and skip without it.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from engine.adapters.v0.build import cuda_available, sim_model_dir
from engine.errors import ConfigError, EngineError
from engine.session import Session
from engine.spec import preset_spec
from engine.stream.records import (SCHEMA_VERSION, Arrivals, DeviceInfo, Header, StepRecord,
                                   decode_record, encode)
from engine.stream.recorder import Recorder
from engine.stream.run import Run
from engine.timeaxis import GPU, SIM, axis_of

ROOT = Path(__file__).resolve().parents[1]


def _steps(items) -> list[StepRecord]:
    return [i for i in items if isinstance(i, StepRecord)]


# ---- exec_s: measured executor time in every step record ------------------------------------

def test_exec_s_is_present_positive_and_plausible_in_sim_records(demo_run):
    items = demo_run("strict", max_steps=300)
    steps = _steps(items)
    assert len(steps) == 300 and all(s.batched_tokens > 0 for s in steps)
    assert all(s.exec_s > 0 for s in steps)  # the executor ran on every step
    # the do-nothing executor: far below a millisecond typically, never a real model's time
    median = sorted(s.exec_s for s in steps)[len(steps) // 2]
    assert 1e-7 < median < 5e-3
    # measured inside the step, so it can never exceed the wall time the steps took
    assert sum(s.exec_s for s in steps) < steps[-1].wall_s
    # and it grows with the work: decode steps over many sequences take longer than tiny ones
    by_seqs = sorted(steps, key=lambda s: s.decode_seqs)
    few = sorted(s.exec_s for s in by_seqs[:50])[25]
    many = sorted(s.exec_s for s in by_seqs[-50:])[25]
    assert many > few


def test_sim_header_names_its_axis_and_device(demo_run):
    import torch

    header = demo_run("strict", max_steps=300)[0]
    assert isinstance(header, Header)
    assert header.time_axis == "sim" and axis_of(header) is SIM
    assert header.device.name == "cpu" and header.device.torch == str(torch.__version__)


def test_recordings_without_the_new_fields_still_load():
    """Schema rule: new fields have defaults, so a recording made before them decodes."""
    step = msgspec.to_builtins(make_step(0))
    del step["exec_s"]
    assert decode_record(json.dumps(step)).exec_s == 0.0
    header = msgspec.to_builtins(make_header())
    del header["time_axis"], header["device"]
    old = msgspec.json.decode(json.dumps(header), type=Header)
    assert old.time_axis == "sim" and old.device == DeviceInfo()


# ---- the time axis follows the header --------------------------------------------------------

def make_header(**over) -> Header:
    fields = dict(schema=SCHEMA_VERSION, observatory_version="0.1.0",
                  vllm_version="0.5.0.post1", backend="sim", model="opt-125m",
                  spec=preset_spec("demo").to_dict(), engine_config={},
                  started_at="2026-01-01T00:00:00+00:00", host="test")
    fields.update(over)
    return Header(**fields)


def make_step(i: int, **over) -> StepRecord:
    """Sim time runs 10 ms a step; measured time 2 ms of executor in 4 ms of wall a step."""
    fields = dict(step=i, wall_s=(i + 1) * 0.004, sim_s=(i + 1) * 0.01, sim_step_s=0.01,
                  exec_s=0.002, policy="off", running=1, swapped=0, waiting=0, running_seqs=1,
                  gpu_used=1, gpu_total=8, cpu_used=0, cpu_total=8, batched_tokens=10,
                  token_budget=64, prefills=[], decode_groups=1, decode_seqs=10,
                  swapped_out=[], swapped_in=[], recomputed=[], ignored=[], finished=[],
                  first_tokens=["a"] if i == 4 else [], prompt_tokens=0, generated_tokens=10,
                  withheld=False, held_back=0)
    fields.update(over)
    return StepRecord(**fields)


def synthetic_run(axis: str) -> Run:
    backend = "gpu" if axis == "gpu" else "sim"
    items = [make_header(backend=backend, time_axis=axis,
                         device=DeviceInfo(name="NVIDIA Test", torch="2.3.0", cuda="12.1",
                                           driver="550.54"))]
    items.append(Arrivals(step=0, sim_s=0.0, source="workload", request_ids=["a"],
                          prompt_tokens=[10], arrival_s=[0.0]))
    items += [make_step(i) for i in range(10)]
    return Run.from_items(items, path=f"{axis}.jsonl")


@pytest.mark.parametrize("axis, unit, step_s, ttft", [
    ("sim", "sim s", 0.01, 0.05),  # first token at the end of step 4: sim_s 0.05
    ("gpu", "GPU s", 0.002, 0.02),  # wall_s 0.02; tokens/s over exec_s, not over wall
])
def test_time_axis_follows_the_header(axis, unit, step_s, ttft):
    from engine.analysis.compare import format_table, run_metrics
    from engine.analysis.export import perfetto_trace, to_csv
    from engine.analysis.summary import summarize

    run = synthetic_run(axis)
    chosen = axis_of(run.header)
    assert chosen.name == axis and chosen.unit == unit

    # plots: tokens per second of the axis
    _, gen = run.series("gen_tps", 0, 9, 10)
    assert gen.tolist() == pytest.approx([10 / step_s] * 10)

    # compare: TTFT and throughput on the axis, and the labels say which
    metrics = run_metrics(run)
    assert metrics.time_axis == axis and metrics.ttft_mean_s == pytest.approx(ttft)
    end = 0.1 if axis == "sim" else 0.04
    assert metrics.throughput_tok_s == pytest.approx(100 / end)
    table = format_table([metrics])
    assert f"TTFT mean s ({chosen.short})" in table and f"gen tok/s ({chosen.short})" in table
    assert unit in table

    # summary: the axis and the measured executor total
    summary = summarize(run.all_items())
    assert summary.time_axis == axis and summary.exec_seconds == pytest.approx(0.02)

    # CSV: the axis columns, named
    rows = list(csv.DictReader(io.StringIO(to_csv(run))))
    assert {r["time_axis"] for r in rows} == {axis}
    assert float(rows[4]["axis_step_s"]) == pytest.approx(step_s)
    assert float(rows[4]["exec_s"]) == pytest.approx(0.002)

    # Perfetto: the process says which time it is, slices sit on that axis
    trace = perfetto_trace(run)
    assert trace["otherData"]["time_axis"] == axis
    process = trace["traceEvents"][0]["args"]["name"]
    steps = [e for e in trace["traceEvents"] if e.get("cat") == "step"]
    if axis == "sim":
        assert "simulated" in process and steps[4]["dur"] == pytest.approx(10_000)
    else:
        assert "measured" in process and "NVIDIA Test" in process
        assert steps[4]["ts"] == pytest.approx(16_000) and steps[4]["dur"] == pytest.approx(4000)
        execs = [e for e in trace["traceEvents"] if e.get("name") == "execute_model"]
        assert len(execs) == 10 and execs[4]["dur"] == pytest.approx(2000)


def test_compare_refuses_to_label_mixed_axes_as_one():
    from engine.analysis.compare import format_table, run_metrics

    table = format_table([run_metrics(synthetic_run("sim")), run_metrics(synthetic_run("gpu"))])
    assert "not comparable" in table and "(sim)" not in table


@pytest.mark.parametrize("axis, clock", [("sim", "sim 0.1 s"), ("gpu", "GPU 0.0 s")])
def test_status_and_detail_label_the_axis(axis, clock):
    from tui.run_view import RunView
    from tui.widgets.status_bar import Status, second_line
    from tui.widgets.step_detail import StepDetail

    view = RunView.from_items(synthetic_run(axis).all_items())
    line = second_line(view, Status(state="finished"), None, 200).plain
    assert clock in line
    assert ("wall" in line) == (axis == "sim")  # on a GPU the wall clock *is* the axis
    detail = StepDetail.describe(view.current, axis=axis_of(view.header)).plain
    assert (f"GPU {view.current.wall_s:,.3f} s" in detail) == (axis == "gpu")
    assert ("exec 2.00 ms" in detail) == (axis == "gpu")


# ---- arrivals: paced by the backend's clock, stamped on the real clock -----------------------

def test_arrivals_follow_the_wall_clock_when_wall_paced():
    """The gpu backend's pacing, exercised on the sim: no request is handed to vLLM before
    its arrival time has passed on the wall clock, and idle gaps are waited out."""
    spec = preset_spec("demo", arrival_rate=25.0, requests=12, max_tokens=4).validated()
    session = Session(spec, wall_paced=True)
    added: list[tuple[float, float]] = []  # (planned arrival, measured time when added)
    session.prepare()
    session.subscribe(lambda i: added.extend(
        (a, time.perf_counter() - session._t0) for a in i.arrival_s)
        if isinstance(i, Arrivals) else None)
    started = time.perf_counter()
    session.run()
    assert len(added) == 12
    assert all(at >= planned for planned, at in added)
    assert time.perf_counter() - started >= added[-1][0]  # took as long as the arrivals span
    assert added[-1][0] > 0.2  # 12 arrivals at 25/s: the span is real seconds, not zero


def test_sim_arrivals_follow_the_simulated_clock(demo_run):
    items = demo_run("off", arrival_rate=1.5, requests=10, max_tokens=64)
    arrivals = [a for a in items if isinstance(a, Arrivals)]
    last = arrivals[-1]
    assert last.arrival_s[-1] > 3.0  # seconds of simulated time...
    assert _steps(items)[-1].wall_s < last.arrival_s[-1]  # ...not waited out on the wall


def test_vllms_own_ttft_is_small_on_the_sim():
    """Arrival stamps are on vLLM's clock (time.time()), so vLLM's own metrics are sane."""
    spec = preset_spec("demo", policy="strict", max_steps=120).validated()
    session = Session(spec)
    session.prepare()
    ttfts: list[float] = []
    stat_logger = session.engine.stat_logger
    original = stat_logger.log

    def capture(stats):
        ttfts.extend(stats.time_to_first_tokens_iter)
        original(stats)

    stat_logger.log = capture  # vLLM calls this once per step with its own Stats
    session.run()
    assert ttfts, "no first tokens in 120 steps"
    assert all(0.0 <= t < 60.0 for t in ttfts), max(ttfts)  # not ~1.7e9


# ---- num_cpu_blocks on the gpu backend: swap space by vLLM's arithmetic ---------------------

@pytest.mark.parametrize("blocks", [1, 7, 512, 3001, 7281])
@pytest.mark.parametrize("block_size", [8, 16, 32])
def test_num_cpu_blocks_round_trips_through_vllms_arithmetic(blocks, block_size):
    from vllm import EngineArgs

    from engine.adapters.v0 import swap_space

    model = sim_model_dir("opt-125m")
    config = EngineArgs(model=model, skip_tokenizer_init=True, block_size=block_size,
                        swap_space=1).create_engine_config()
    block_bytes = swap_space.cache_block_bytes(config)
    gib = swap_space.swap_space_gib_for(blocks, block_bytes)
    config = EngineArgs(model=model, skip_tokenizer_init=True, block_size=block_size,
                        swap_space=gib).create_engine_config()
    assert swap_space.derived_cpu_blocks(config) == blocks
    # the sim executor computes CPU blocks with the same formula: a sim engine agrees
    recorded = swap_space.translation(blocks, config)
    assert recorded["derived_cpu_blocks"] == blocks and recorded["num_cpu_blocks"] == blocks


def test_an_engine_built_from_the_translated_swap_space_has_the_blocks():
    """The translated swap space, given to vLLM's own block arithmetic in a real engine (the
    sim executor derives CPU blocks with the GPU worker's formula)."""
    from vllm import EngineArgs

    from engine.adapters.v0 import swap_space
    from engine.adapters.v0.build import build_engine

    config = EngineArgs(model=sim_model_dir("opt-125m"),
                        skip_tokenizer_init=True).create_engine_config()
    gib = swap_space.swap_space_gib_for(512, swap_space.cache_block_bytes(config))
    built = build_engine(preset_spec("demo", num_cpu_blocks=None, swap_space_gib=gib).validated())
    assert built.engine.cache_config.num_cpu_blocks == 512


# ---- build errors: one line naming the cause -------------------------------------------------

def test_a_model_directory_without_a_tokenizer_is_one_line(tmp_path):
    """vLLM's real engine construction, with a model directory that has a config but no
    tokenizer: the failure comes out of transformers deep inside LLMEngine.__init__."""
    from vllm import EngineArgs, LLMEngine

    from engine.adapters.v0.build_errors import build_errors
    from engine.adapters.v0.sim_executor import SimExecutor

    model = tmp_path / "no-tokenizer"
    model.mkdir()
    shutil.copy(Path(sim_model_dir("opt-125m")) / "config.json", model / "config.json")
    config = EngineArgs(model=str(model), num_gpu_blocks_override=64,
                        enforce_eager=True).create_engine_config()
    with pytest.raises(EngineError) as caught:
        with build_errors(str(model)):
            LLMEngine(**config.to_dict(), executor_class=SimExecutor.configured(64, 64, 0, 0.0),
                      log_stats=False)
    message = str(caught.value)
    assert "\n" not in message and "model not found" in message and str(model) in message


def test_a_missing_tokenizer_directory_is_a_config_error(tmp_path):
    from engine.adapters.v0.build import build_engine

    with pytest.raises(ConfigError) as caught:
        build_engine(preset_spec("demo", tokenizer=str(tmp_path / "missing")).validated())
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("exc, cause", [
    ("torch.cuda.OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 GiB')",
     "out of memory"),
    ("ValueError('No available memory for the cache blocks. Try increasing "
     "`gpu_memory_utilization` when initializing the engine.')", "out of memory"),
    ("ValueError('Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
     "Your Tesla T4 GPU has compute capability 7.5.')", "unsupported dtype"),
    ("OSError(\"Can't load tokenizer for 'x'. If you were trying to load it from "
     "'https://huggingface.co/models'...\\nmore\")", "model not found"),
    ("RuntimeError('something else entirely')", "vLLM could not build the engine"),
])
def test_build_failures_name_their_cause_in_one_line(exc, cause):
    import torch  # noqa: F401  (used by the expressions)

    from engine.adapters.v0.build_errors import build_errors

    with pytest.raises(EngineError) as caught:
        with build_errors("m"):
            raise eval(exc)
    assert cause in str(caught.value) and "\n" not in str(caught.value)


def test_gpu_backend_accepts_num_cpu_blocks_up_to_the_cuda_check():
    """The demo preset sets num_cpu_blocks; on the gpu backend that is no longer refused (the
    only error without CUDA is the CUDA one)."""
    from engine.adapters.v0.build import build_engine

    if cuda_available():
        pytest.skip("has CUDA: the gpu tests below build it for real")
    with pytest.raises(ConfigError, match="needs a CUDA device"):
        build_engine(preset_spec("demo", backend="gpu").validated())


# ---- the smoke bench: skips without CUDA, its model builds offline on any CPU ----------------

def _gpu_smoke():
    spec = importlib.util.spec_from_file_location("gpu_smoke", ROOT / "bench" / "gpu_smoke.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(cuda_available(), reason="has CUDA: the smoke would really run")
def test_gpu_smoke_skips_cleanly_without_cuda():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_smoke.py")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.startswith("gpu_smoke: skipped: no CUDA")


def test_gpu_smoke_builds_a_tiny_model_offline_that_vllm_accepts(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from conftest import run_items

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model_dir = str(_gpu_smoke().build_tiny_opt(tmp_path / "tiny"))
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    assert tokenizer.eos_token_id == 2 and tokenizer.pad_token_id == 1
    ids = tokenizer("```python\ndef schedule(self):").input_ids
    assert tokenizer.decode(ids) == "```python\ndef schedule(self):"
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    assert model.config.hidden_size // model.config.num_attention_heads == 64  # vLLM's minimum
    assert max(ids) < model.config.vocab_size
    # vLLM reads the directory (config, its own block arithmetic) and the workload is tokenized
    # by its tokenizer: the seed's shape, on the sim backend
    items = run_items(preset_spec("seed-5578", model=model_dir, tokenizer=model_dir,
                                  requests=8, max_steps=10))
    steps = _steps(items)
    assert len(steps) == 10 and sum(s.prompt_tokens for s in steps) > 8 * 100


# ---- on a real GPU ----------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
def test_gpu_demo_runs_a_real_model():
    from conftest import run_items

    spec = preset_spec("demo", backend="gpu", policy="strict", max_steps=50)
    items = run_items(spec)
    header, steps = items[0], _steps(items)
    assert len(steps) == 50
    assert sum(s.generated_tokens for s in steps) > 0
    assert header.time_axis == "gpu" and axis_of(header) is GPU
    assert header.device.name and header.device.cuda and header.device.torch
    assert all(s.cpu_total == 512 for s in steps)  # the demo's num_cpu_blocks, via swap space
    assert header.engine_config["swap_space_from_num_cpu_blocks"]["derived_cpu_blocks"] == 512
    assert all(s.exec_s > 0 for s in steps) and sum(s.exec_s for s in steps) < steps[-1].wall_s


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
def test_gpu_seed_prompts_are_tokenized_by_vllm():
    from conftest import run_items

    items = run_items(preset_spec("seed-5578", backend="gpu", requests=16, max_steps=20))
    steps = _steps(items)
    assert steps and sum(s.prompt_tokens for s in steps) > 16 * 200


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
def test_gpu_tiny_offline_model_records_measured_time(tmp_path, monkeypatch):
    """Offline: the smoke's tiny model on the real GPU executor, seed-shaped, 30 steps."""
    from conftest import run_items

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    smoke = _gpu_smoke()
    model_dir = str(smoke.build_tiny_opt(tmp_path / "tiny"))
    items = run_items(smoke.smoke_spec(model_dir, steps=30, requests=32))
    header, steps = items[0], _steps(items)
    assert header.time_axis == "gpu" and header.device.name and header.device.capability
    assert len(steps) == 30 and all(s.cpu_total == smoke.SEED_CPU_BLOCKS for s in steps)
    assert all(0 < s.exec_s < s.wall_s for s in steps)


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
def test_gpu_smoke_runs(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_smoke.py"), "--steps", "30",
                          "--pairs", "1", "--requests", "32"],
                         capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "observer overhead" in out.stdout and "exec_s" in out.stdout


def test_encode_keeps_the_header_small_for_sim():
    """DeviceInfo omits empty fields, so a sim header gains only what it knows."""
    line = encode(make_header(device=DeviceInfo(name="cpu", torch="2.3.0")))
    assert b'"device":{"name":"cpu","torch":"2.3.0"}' in line


# ---- restarts and quits: the engine is its own process ---------------------------------------

def test_closing_while_the_engine_loads_ends_the_process_at_once(tmp_path):
    """A quit (or an R restart, which closes the old child first) during vLLM's import and
    model load: the engine process exits within 2 s, whatever it was doing, and leaves no
    recording; its GPU memory goes with it."""
    from engine.child import spawn_local
    from engine.stream.protocol import Progress

    record = tmp_path / "never.jsonl.zst"
    link = spawn_local(preset_spec("demo"), str(record))
    for item in link.items():
        if isinstance(item, Progress):  # the child is up and importing vLLM
            break
    started = time.monotonic()
    link.close(timeout=0.8)
    assert time.monotonic() - started < 1.5
    deadline = time.monotonic() + 2
    while not _gone(link.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _gone(link.pid), "the engine process outlived its owner's close by 2 s"
    assert not record.exists()


def _gone(pid: int) -> bool:
    """The process has exited (a zombie nobody reaped yet counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


async def test_a_gpu_recording_replays_on_its_measured_axis(tmp_path, demo_run):
    """A real run's records re-labelled as measured on a GPU: the replay's token plot, status
    line and step detail all say "GPU s", and the token rates are over exec_s."""
    from tui.launch import replay_app
    from tui.widgets.run_plot import RunPlot
    from tui.widgets.status_bar import StatusBar
    from tui.widgets.step_detail import StepDetail

    items = demo_run("strict", max_steps=300)
    header = msgspec.structs.replace(items[0], backend="gpu", time_axis="gpu",
                                     device=DeviceInfo(name="NVIDIA Test"))
    path = tmp_path / "gpu.jsonl"
    recorder = Recorder(path, header, background_flush=False)
    for item in items[1:]:
        recorder.write(item)
    recorder.close()
    app = replay_app([str(path)], autoplay=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("end")
        await pilot.pause()
        screen = app.main_screen
        assert screen.query_one("#plot-tokens", RunPlot).title == "tokens/GPU s"
        status = str(screen.query_one(StatusBar).render())
        assert re.search(r"GPU [\d,]+\.\d s", status) and not re.search(r"sim [\d,.]+ s", status)
        assert "exec " in str(screen.query_one(StepDetail).render())
        _, gen = screen.view.series("gen_tps", 0, 299, 1)
        steps = _steps(items)
        assert gen[0] == pytest.approx(sum(s.generated_tokens for s in steps)
                                       / sum(s.exec_s for s in steps))


def test_gpu_engine_config_for_the_demo_preset_on_a_local_model(tmp_path, monkeypatch):
    """The gpu backend's own config path (everything before the GPU executor), on a CPU: the
    demo preset's num_cpu_blocks becomes a swap space, recorded with the count it yields."""
    from engine.adapters.v0.build import engine_config

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model_dir = str(_gpu_smoke().build_tiny_opt(tmp_path / "tiny"))
    config, translation = engine_config(preset_spec("demo", backend="gpu", model=model_dir,
                                                    tokenizer=model_dir).validated())
    assert translation is not None and translation["num_cpu_blocks"] == 512
    assert translation["derived_cpu_blocks"] == 512
    # 2 layers x (K and V) x 16 tokens x 2 heads x 64 x fp16
    assert translation["block_bytes"] == 2 * 2 * 16 * 2 * 64 * 2
    assert config.cache_config.swap_space_bytes == pytest.approx(512.5 * translation["block_bytes"])


def test_a_gpu_model_that_does_not_exist_is_one_line_naming_the_cause(tmp_path, monkeypatch):
    from engine.adapters.v0.build import engine_config

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    missing = str(tmp_path / "no-such-model")
    with pytest.raises(EngineError) as caught:
        engine_config(preset_spec("demo", backend="gpu", model=missing).validated())
    message = str(caught.value)
    assert "\n" not in message and "model not found" in message and missing in message
