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
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import msgspec
import pytest

from engine.adapters.v0.build import cuda_available, shutdown_engine, sim_model_dir
from engine.errors import ConfigError, EngineError
from engine.session import Session
from engine.spec import preset_spec
from engine.stream.records import (SCHEMA_VERSION, Arrivals, DeviceInfo, Header, StepRecord,
                                   decode_record, encode)
from engine.analysis.summary import SummaryBuilder
from engine.stream.recorder import Recorder
from engine.stream.run import Run
from engine.stream.timeaxis import GPU, SIM, axis_of

ROOT = Path(__file__).resolve().parents[1]


def _steps(items) -> list[StepRecord]:
    return [i for i in items if isinstance(i, StepRecord)]


# ---- exec_s: measured executor time in every step record ------------------------------------

def test_exec_s_is_present_and_positive_in_sim_records(demo_run):
    """Every step ran the executor, so every step has a measured time; measured inside the
    steps, their sum can never exceed the wall time the steps took. (How long it is belongs to
    bench/bench_exec_timing.py, not to a test on a loaded machine.)"""
    items = demo_run("strict", max_steps=300)
    steps = _steps(items)
    assert len(steps) == 300 and all(s.batched_tokens > 0 for s in steps)
    assert all(s.exec_s > 0 for s in steps)  # the executor ran on every step
    assert sum(s.exec_s for s in steps) < steps[-1].wall_s


class _Clock:
    """A perf_counter that moves only when told: the timer's arithmetic, without the machine's."""

    def __init__(self) -> None:
        self.now = 100.0
        self.events: list[str] = []

    def perf_counter(self) -> float:
        return self.now


def test_exec_timer_measures_exactly_the_executor_call_between_two_synchronizations(
        monkeypatch):
    """ExecTimer on a real sim engine's executor: the time inside `execute_model` (and only
    that) is what `take()` returns, a step that skips the executor takes 0.0, the device is
    synchronised before the clock starts and before it stops, and detach restores vLLM's own
    method."""
    import types

    from engine.adapters import exec_timing
    from engine.adapters.v0.build import build_engine, shutdown_engine

    clock = _Clock()
    monkeypatch.setattr(exec_timing, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    built = build_engine(preset_spec("demo", max_steps=3).validated())
    try:
        executor = built.engine.model_executor
        inner = executor.execute_model

        def slow(*args, **kwargs):
            clock.events.append("execute")
            clock.now += 0.25  # the executor's call takes 0.25 s on this clock
            return inner(*args, **kwargs)

        executor.execute_model = slow
        timer = exec_timing.ExecTimer(built.engine, synchronize=lambda: clock.events.append("sync"))
        assert timer.take() == 0.0  # nothing ran yet
        from vllm import SamplingParams

        built.engine.add_request("r", {"prompt_token_ids": [5] * 16}, SamplingParams(max_tokens=4))
        clock.now += 7.0  # time outside the executor is not counted
        built.engine.step()
        assert timer.take() == 0.25 and timer.calls == 1
        assert clock.events == ["sync", "execute", "sync"]
        built.engine.step()
        built.engine.step()
        assert timer.take() == 0.5 and timer.calls == 3
        timer.detach()  # the instance's own attribute goes: the class's method is back
        assert "execute_model" not in vars(executor)
        built.engine.step()
        assert timer.take() == 0.0 and timer.calls == 3
    finally:
        shutdown_engine(built.engine)


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
        (a, session.elapsed()) for a in i.arrival_s)
        if isinstance(i, Arrivals) else None)
    started = time.perf_counter()
    try:
        session.run()
    finally:
        shutdown_engine(session.engine)
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
    try:
        session.run()
    finally:
        shutdown_engine(session.engine)
    assert ttfts, "no first tokens in 120 steps"
    assert all(0.0 <= t < 60.0 for t in ttfts), max(ttfts)  # not ~1.7e9


# ---- num_cpu_blocks on the gpu backend: swap space by vLLM's arithmetic ---------------------

@pytest.mark.parametrize("blocks", [1, 7, 512, 3001, 7281])
@pytest.mark.parametrize("block_size", [8, 16, 32])
def test_num_cpu_blocks_round_trips_through_vllms_arithmetic(blocks, block_size):
    """The gpu backend's own config path turns a block count into the swap space from which
    vLLM's GPU worker (`int(swap_space_bytes // cache block bytes)`) derives exactly that
    count; the block size is checked against OPT-125m's architecture, not vLLM's function."""
    from engine.adapters.v0 import swap_space
    from engine.adapters.v0.build import engine_config

    model = sim_model_dir("opt-125m")
    config, recorded = engine_config(preset_spec("demo", backend="gpu", model=model,
                                                 num_cpu_blocks=blocks,
                                                 block_size=block_size).validated())
    # K and V x 12 layers x block_size tokens x 768 hidden x 2 bytes (fp16)
    block_bytes = 2 * 12 * block_size * 768 * 2
    assert swap_space.cache_block_bytes(config) == block_bytes
    swap_bytes = config.cache_config.swap_space_bytes
    assert blocks * block_bytes <= swap_bytes < (blocks + 1) * block_bytes
    assert recorded == {"num_cpu_blocks": blocks, "block_bytes": block_bytes,
                        "swap_space_gib": swap_bytes / 2**30, "derived_cpu_blocks": blocks}


def test_an_engine_built_from_the_translated_swap_space_has_the_blocks():
    """The translated swap space, given to vLLM's own block arithmetic in a real engine (the
    sim executor derives CPU blocks with the GPU worker's formula)."""
    from vllm import EngineArgs

    from engine.adapters.v0 import swap_space
    from engine.adapters.v0.build import build_engine, shutdown_engine

    config = EngineArgs(model=sim_model_dir("opt-125m"),
                        skip_tokenizer_init=True).create_engine_config()
    gib = swap_space.swap_space_gib_for(512, swap_space.cache_block_bytes(config))
    built = build_engine(preset_spec("demo", num_cpu_blocks=None, swap_space_gib=gib).validated())
    try:
        assert built.engine.cache_config.num_cpu_blocks == 512
        scheduler = built.scheduler
        allocator = getattr(scheduler.block_manager, "cpu_allocator", None)
        if allocator is not None:  # vLLM's block manager holds that many CPU blocks
            assert allocator.get_num_free_blocks() == 512
    finally:
        shutdown_engine(built.engine)


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


def test_gpu_backend_without_cuda_is_one_line_naming_the_fix():
    """Without CUDA, `build_engine` for the gpu backend stops before vLLM loads, in one line
    that names the way out. (tests/test_gpu_path.py drives the gpu build further, up to the
    device, with the demo's num_cpu_blocks.)"""
    from engine.adapters.v0.build import build_engine

    if cuda_available():
        pytest.skip("has CUDA: the gpu tests below build it for real")
    with pytest.raises(ConfigError) as caught:
        build_engine(preset_spec("demo", backend="gpu").validated())
    message = str(caught.value)
    assert "\n" not in message and "needs a CUDA device" in message
    assert "--backend sim" in message


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


def _offline_python(code: str) -> dict:
    """Run `code` in a fresh process with HF_HUB_OFFLINE set before anything imports
    huggingface_hub (it reads it once, at import), so any hub access raises; its last stdout
    line is JSON."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=600, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_gpu_smoke_builds_a_tiny_model_offline_that_vllm_accepts(tmp_path):
    model_dir = str(tmp_path / "tiny")
    facts = _offline_python(f"""
        import importlib.util, json
        spec = importlib.util.spec_from_file_location("gpu_smoke", {str(ROOT / "bench" / "gpu_smoke.py")!r})
        smoke = importlib.util.module_from_spec(spec); spec.loader.exec_module(smoke)
        import huggingface_hub.constants
        assert huggingface_hub.constants.HF_HUB_OFFLINE  # any hub access would raise
        model_dir = str(smoke.build_tiny_opt({model_dir!r}))
        from transformers import AutoModelForCausalLM, AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        ids = tokenizer("```python\\ndef schedule(self):").input_ids
        model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
        from engine.adapters.v0.build import engine_config
        from engine.spec import preset_spec
        config, _ = engine_config(preset_spec("seed-5578", backend="gpu", model=model_dir,
                                              tokenizer=model_dir).validated())
        print(json.dumps({{"eos": tokenizer.eos_token_id, "pad": tokenizer.pad_token_id,
                          "round_trip": tokenizer.decode(ids), "max_id": max(ids),
                          "head": model.config.hidden_size // model.config.num_attention_heads,
                          "vocab": model.config.vocab_size,
                          "vllm_vocab": config.model_config.get_vocab_size(),
                          "vllm_layers": config.model_config.hf_config.num_hidden_layers}}))
    """)
    assert facts["eos"] == 2 and facts["pad"] == 1
    assert facts["round_trip"] == "```python\ndef schedule(self):"
    assert facts["head"] == 64  # vLLM 0.5's paged attention minimum
    assert facts["max_id"] < facts["vocab"] == facts["vllm_vocab"]  # vLLM read the directory
    assert facts["vllm_layers"] == 2
    # vLLM reads the directory (config, its own block arithmetic) and the workload is tokenized
    # by its tokenizer: the seed's shape, on the sim backend
    items = run_items(preset_spec("seed-5578", model=model_dir, tokenizer=model_dir,
                                  requests=8, max_steps=10))
    steps = _steps(items)
    assert len(steps) == 10 and sum(s.prompt_tokens for s in steps) > 8 * 100


# ---- on a real GPU ----------------------------------------------------------------------------

def run_items(spec) -> list:
    """Run `spec` to its end and shut its engine down (the next test gets a free GPU)."""
    from engine.adapters.v0.build import shutdown_engine

    items: list = []
    session = Session(spec.validated())
    session.subscribe(items.append)
    try:
        session.run()
    finally:
        shutdown_engine(session.engine)
    return items


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
def test_gpu_demo_runs_a_real_model():
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
    items = run_items(preset_spec("seed-5578", backend="gpu", requests=16, max_steps=20))
    steps = _steps(items)
    assert steps and sum(s.prompt_tokens for s in steps) > 16 * 200


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
def test_gpu_tiny_local_model_records_measured_time(tmp_path):
    """The smoke's tiny local model on the real GPU executor, seed-shaped, 30 steps."""
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
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_smoke.py"), "--max-steps",
                          "300", "--compare-steps", "50", "--requests", "64",
                          "--overhead-pairs", "1"],
                         capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "observer overhead" in out.stdout and "exec_s: p50" in out.stdout
    assert "decisions: identical" in out.stdout


def test_encode_keeps_the_header_small_for_sim():
    """DeviceInfo omits empty fields, so a sim header gains only what it knows."""
    line = encode(make_header(device=DeviceInfo(name="cpu", torch="2.3.0")))
    assert b'"device":{"name":"cpu","torch":"2.3.0"}' in line


# ---- restarts and quits: the engine is its own process ---------------------------------------

@pytest.mark.timeout(120)
def test_closing_while_the_engine_loads_ends_the_process_on_its_own(tmp_path):
    """A quit (or an R restart, which closes the old child first) during vLLM's import and
    model load: the engine process exits by itself (cleanly, no signal needed: waited for by
    PID), and leaves no recording; its GPU memory goes with it. How fast is a bench figure."""
    from engine.child import spawn_local
    from engine.stream.protocol import Progress

    record = tmp_path / "never.jsonl.zst"
    link = spawn_local(preset_spec("demo"), str(record))
    for item in link.items():
        if isinstance(item, Progress):  # the child is up and importing vLLM
            break
    link.close(timeout=0.0)
    assert link._process.wait() == 0  # exited by itself: a signal would be negative
    assert not record.exists()


@pytest.mark.timeout(120)
def test_a_restart_starts_the_new_engine_only_after_the_old_one_is_gone(tmp_path, monkeypatch):
    """The live screen's R: the old source is closed and the next one opened at once. An old
    engine that does not exit (stopped here with SIGSTOP, as a process stuck in a driver call
    would be) must be gone, waited for by PID, before the new engine process starts."""
    import signal
    import threading

    import engine.child
    from tui.launch import local_engine_source

    spawned: list[tuple[int, int | None]] = []  # (new pid, the old process's exit code then)
    first_up = threading.Event()
    real_spawn = engine.child.spawn_local
    sources = []

    def spawn(spec, path, **options):  # pace, hold_s: as the launcher gives them
        old = sources[0]._link._process.poll() if len(sources) > 1 else None
        link = real_spawn(spec, path, **options)
        spawned.append((link.pid, old))
        first_up.set()
        return link

    monkeypatch.setattr(engine.child, "spawn_local", spawn)
    factory = local_engine_source(None)
    spec = preset_spec("demo", max_steps=5).validated()
    first = factory(spec)
    sources.append(first)
    first.start(None)
    first_up.wait()  # the reader thread spawned the child
    os.kill(spawned[0][0], signal.SIGSTOP)  # it cannot answer the stop, nor exit by itself
    first.close()  # what LiveScreen.action_restart does, then it opens the next source
    second = factory(spec)
    sources.append(second)
    second.start(None)
    second._thread.join()
    assert len(spawned) == 2
    new_pid, old_code_at_spawn = spawned[1]
    assert old_code_at_spawn is not None, "the new engine started while the old one was alive"
    assert old_code_at_spawn == -signal.SIGKILL  # a stopped process only goes with SIGKILL
    second.wait_gone()


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
    recorder = Recorder(path, header, background_flush=False, fold=SummaryBuilder)
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


def test_gpu_engine_config_for_the_demo_preset_on_a_local_model(tmp_path):
    """The gpu backend's own config path (everything before the GPU executor), on a CPU: the
    demo preset's num_cpu_blocks becomes a swap space, recorded with the count it yields."""
    from engine.adapters.v0.build import engine_config

    model_dir = str(_gpu_smoke().build_tiny_opt(tmp_path / "tiny"))  # local: no hub access
    config, translation = engine_config(preset_spec("demo", backend="gpu", model=model_dir,
                                                    tokenizer=model_dir).validated())
    assert translation is not None and translation["num_cpu_blocks"] == 512
    assert translation["derived_cpu_blocks"] == 512
    # 2 layers x (K and V) x 16 tokens x 2 heads x 64 x fp16
    assert translation["block_bytes"] == 2 * 2 * 16 * 2 * 64 * 2
    assert config.cache_config.swap_space_bytes == pytest.approx(512.5 * translation["block_bytes"])


def test_a_gpu_model_that_does_not_exist_is_one_line_naming_the_cause(tmp_path):
    missing = str(tmp_path / "no-such-model")
    result = _offline_python(f"""
        import json
        from engine.adapters.v0.build import engine_config
        from engine.errors import ObservatoryError
        from engine.spec import preset_spec
        try:
            engine_config(preset_spec("demo", backend="gpu", model={missing!r}).validated())
            print(json.dumps({{"error": None}}))
        except ObservatoryError as exc:
            print(json.dumps({{"error": str(exc), "kind": type(exc).__name__}}))
    """)
    message = result["error"]
    assert message and "\n" not in message and "model not found" in message and missing in message
    assert result["kind"] == "EngineError"
