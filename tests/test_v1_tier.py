"""vLLM's CPU KV tier (V1: 0.33, 0.34) under the observatory: vLLM's own OffloadingConnector
(its scheduler side, CPUOffloadingManager and LRU eviction) with the sim executor as its worker,
the tier in each V1 step record, and the `v1-prefix-offload` preset.

The engine tests run only where a V1 release is installed (`pip install -e '.[vllm033,test]'`) and
need PYTHONHASHSEED=0 from the interpreter's start: `PYTHONHASHSEED=0 pytest
tests/test_v1_tier.py`. The record and plot tests at the end need no vLLM and run everywhere.
"""

from __future__ import annotations

import sys
from typing import Any

import msgspec
import pytest

from engine.adapters.versions import installed_version
from engine.stream.records import (SCHEMA_VERSION, Header, RunFinished, V1StepRecord,
                                   decode_record, encode)

from v1_required import NEEDS_V1, V1_INSTALLED, cpu_tier_refusal, require_hash_seed

require_hash_seed()
_REFUSAL = cpu_tier_refusal()
needs_tier = pytest.mark.skipif(
    not V1_INSTALLED or _REFUSAL is not None,
    reason=_REFUSAL or NEEDS_V1)
"""The tier's tests: where the installed release refuses the tier (0.18.0, tier_v018.py), the
refusal is what is tested instead (test_a_release_without_the_tier_refuses_it_in_one_line)."""

PRESET = "v1-prefix-offload"
_runs: dict[str, list] = {}
_counters: dict[str, Any] = {}


def run(**over: Any) -> list:
    """Everything a session of the preset emitted, once per argument set."""
    from engine.adapters.v1.offload_metrics import read_counters
    from engine.session import Session
    from engine.spec import preset_spec

    key = repr(sorted(over.items()))
    if key not in _runs:
        items: list = []
        session = Session(preset_spec(PRESET, **over).validated())
        session.subscribe(items.append)
        session.run()
        _runs[key] = items
        # vLLM's counters are the engine built last: read them before another test builds one
        # (the run is cached, and in random order another engine may come between)
        _counters[key] = read_counters()
    return _runs[key]


def counters_of(**over: Any) -> Any:
    """vLLM's CPU-tier counters as that run left them (offload_metrics.OffloadCounters)."""
    run(**over)
    return _counters[repr(sorted(over.items()))]


def steps_of(items: list) -> list[V1StepRecord]:
    return [i for i in items if type(i) is V1StepRecord]


@pytest.mark.skipif(not V1_INSTALLED or _REFUSAL is None,
                    reason="the installed release runs the CPU tier")
def test_a_release_without_the_tier_refuses_it_in_one_line():
    import subprocess

    out = subprocess.run([sys.executable, "-m", "tui.cli", "run", "--preset", PRESET,
                          "--max-steps", "5", "--json", "--no-record"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 2, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("observatory:")]
    assert len(lines) == 1 and "--kv-offloading-size" in lines[0], out.stderr
    assert "Traceback" not in out.stderr
    # the same preset without the tier runs
    out = subprocess.run([sys.executable, "-m", "tui.cli", "run", "--preset", PRESET,
                          "--kv-offloading-size", "0", "--max-steps", "5", "--json",
                          "--no-record"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert msgspec.json.decode(out.stdout)["steps"] == 5


@needs_tier
def test_prefixes_come_back_from_the_cpu_tier_and_the_bytes_equal_vllms_counters():
    """The counters are vLLM's own Prometheus ones (what /metrics shows), fed by the bytes
    the sim worker reported for each job it completed; the records count each job's bytes
    when vLLM issued it. Every job is done by the end, so the two must agree exactly."""
    from engine.analysis.summary import summarize

    items = run()
    counters = counters_of()  # read when this run's engine was the last one built
    summary = summarize(items)
    steps = steps_of(items)
    assert summary.end_reason == "completed" and summary.finished_requests == 64
    assert summary.cpu_tier_hit_tokens > 0 and summary.cpu_tier_loads > 0
    assert summary.cpu_tier_stores > 0
    assert summary.cpu_tier_load_bytes == counters.load_bytes > 0
    assert summary.cpu_tier_store_bytes == counters.store_bytes > 0
    assert summary.cpu_tier_hit_tokens == counters.external_hit_tokens  # no preemptions here
    assert sum(s.cpu_load_bytes for s in steps) == counters.load_bytes
    # the tier fills up and LRU evicts: the preset's tier is smaller than what it stores
    assert summary.peak_cpu_tier_chunks == summary.cpu_tier_chunks > 0
    assert summary.cpu_tier_evictions > 0
    assert all(s.cpu_chunks <= s.cpu_chunks_total for s in steps)
    assert steps[-1].cpu_in_flight == 0  # no job left waiting: the engine can go idle


@needs_tier
def test_without_the_tier_the_same_preset_computes_more_tokens():
    from engine.analysis.summary import summarize

    tier = summarize(run())
    none = summarize(run(kv_offloading_gib=0.0))
    assert none.computed_tokens > tier.computed_tokens
    assert none.finished_requests == tier.finished_requests == 64
    assert (none.cpu_tier_chunks, none.cpu_tier_loads, none.cpu_tier_hit_tokens) == (0, 0, 0)
    assert all(s.cpu_chunks_total == 0 and s.cpu_pct == 0.0 for s in steps_of(run(
        kv_offloading_gib=0.0)))


@needs_tier
def test_the_bandwidth_delays_completions_by_steps_and_the_clock_charges_them():
    """At 0.5 GB/s a prefix's load (64 blocks of 589,824 bytes: 75 ms) outlasts many 5 ms
    steps: its request waits that many steps, some steps have nothing else to do, and the run
    takes longer on the simulated clock. Decisions about what to load do not change."""
    from engine.analysis.summary import summarize

    fast, slow = summarize(run()), summarize(run(offload_bandwidth_gbps=0.5))
    assert slow.steps > fast.steps and slow.sim_seconds > fast.sim_seconds
    assert slow.cpu_tier_load_bytes == fast.cpu_tier_load_bytes
    assert slow.computed_tokens == fast.computed_tokens
    idle = [s for s in steps_of(run(offload_bandwidth_gbps=0.5)) if s.batched_tokens == 0]
    assert idle and all(s.cpu_in_flight > 0 for s in idle)


@needs_tier
def test_spread_arrivals_finish_every_load_and_request():
    """Arrivals spread over time (20 a second) put each load on the simulated clock: the
    driver once moved its clock to vLLM's arrival stamp (time.time(), ~1.8e9 s), so a load
    issued in an arrival's step was due at that epoch second, and the last arrival's loads
    never came (requests left in WAITING_FOR_REMOTE_KVS for good, the engine stepping on)."""
    from engine.analysis.summary import summarize

    items = run(arrival_rate=20.0, max_steps=5000)
    summary = summarize(items)
    assert summary.cpu_tier_loads > 0
    assert summary.end_reason == "completed" and summary.finished_requests == 64
    assert steps_of(items)[-1].cpu_in_flight == 0


@needs_tier
def test_requests_left_waiting_for_their_loads_end_the_run_stuck_and_it_verifies(tmp_path):
    """Issue #40: loads that do not complete (here: 1 kB/s, a block's load takes ten simulated
    minutes) leave requests in WAITING_FOR_REMOTE_KVS and the engine stepping on idle. The
    no-progress guard ends the run with a reason naming the load, the recording is sealed, and
    `verify` replays it to the same end."""
    from engine.analysis.progress import LOGGER, REASON, STEPS
    from engine.analysis.verify import verify_file
    from engine.session import Session
    from engine.spec import preset_spec
    from engine.analysis.summary import SummaryBuilder
    from engine.stream.recorder import Recorder

    path = tmp_path / "stuck.jsonl.zst"
    items: list = []
    recorder = Recorder(str(path), fold=SummaryBuilder)
    session = Session(preset_spec(PRESET, offload_bandwidth_gbps=1e-6).validated())
    session.subscribe(items.append)
    session.subscribe(recorder.sink)
    session.run()
    recorder.close()
    (end,) = [r for r in items if type(r) is RunFinished]
    (line,) = [r for r in items if getattr(r, "logger", None) == LOGGER]
    last = steps_of(items)[-1]
    assert end.reason == REASON and end.steps == last.step + 1
    assert last.batched_tokens == 0 and last.cpu_in_flight > 0 and last.waiting > 0
    assert f"for {STEPS:,} steps" in line.message and "async KV load" in line.message
    result = verify_file(str(path))
    assert result.ok, result.message


@needs_tier
def test_a_step_that_must_wait_for_a_flushed_store_is_charged_the_wait():
    """A preempted request's stores in flight are flushed (vLLM's `jobs_to_flush`): the
    worker waits for them before the forward pass, and the sim charges that step the wait."""
    from engine.session import Session
    from engine.spec import preset_spec

    items: list = []
    session = Session(preset_spec("v1-concurrent-prefill", kv_offloading_gib=0.5,
                                  offload_bandwidth_gbps=2.0, max_steps=60).validated())
    session.subscribe(items.append)
    session.run()
    waited = [s for s in steps_of(items) if s.cpu_wait_s > 0]
    assert waited and all(s.preempted for s in waited)
    cost = session.spec.cost
    for s in waited:
        assert s.sim_step_s >= s.cpu_wait_s + cost.base_s


@needs_tier
def test_a_request_aborted_mid_load_is_reported_and_freed():
    """vLLM frees an aborted request's blocks only when its load is reported: the worker
    reports it like any other, so nothing waits for a transfer forever. Every byte the worker
    moved is in vLLM's load counter, except on a release whose offline engine records a
    step's stats only when the step has a request output (0.24: the tier module's
    COUNTED_ONLY_ON_OUTPUT_STEPS): there the counter leaves out the loads that landed on the
    steps without one, and this run has such steps."""
    from engine.adapters.v1.offload_metrics import load_bytes_in, read_counters
    from engine.analysis.summary import summarize
    from engine.session import Session
    from engine.spec import preset_spec

    items: list = []
    aborted: list[str] = []
    # a step limit well past the run's ~1,500 steps: a load never reported would keep the
    # engine stepping for good (vLLM waits for it), and the run would stop there instead
    session = Session(preset_spec(PRESET, offload_bandwidth_gbps=0.5,
                                  max_steps=4000).validated())
    session.prepare()  # vLLM's engine: watch what each of its steps hands the stat loggers
    outputless: list[int] = []  # the load bytes in the stats of steps with no request output
    client = session.driver.engine.engine_core
    get_output = client.get_output

    def watched_get_output() -> Any:
        outputs = get_output()
        if not outputs.outputs and outputs.scheduler_stats is not None:
            outputless.append(load_bytes_in(outputs.scheduler_stats))
        return outputs

    client.get_output = watched_get_output

    def abort_one_loading(item: Any) -> None:
        items.append(item)
        if aborted or type(item) is not V1StepRecord or not item.cpu_loads:
            return
        from vllm.v1.request import RequestStatus  # once the engine is built: vLLM's platform

        scheduler = session.driver.scheduler
        loading = [rid for rid, r in scheduler.requests.items()
                   if r.status == RequestStatus.WAITING_FOR_REMOTE_KVS]
        if loading:
            aborted.append(loading[0])
            session.driver.engine.abort_request([loading[0]])

    session.subscribe(abort_one_loading)
    session.run()
    assert aborted
    summary = summarize(items)
    last = steps_of(items)[-1]
    assert summary.end_reason == "completed" and summary.finished_requests == 63
    assert (last.running, last.waiting, last.gpu_used, last.cpu_in_flight) == (0, 0, 0, 0)
    assert not session.driver.scheduler.requests
    from engine.adapters.v1.current import tier

    assert sum(outputless) > 0  # loads landed on steps without a request output
    left_out = sum(outputless) if tier.COUNTED_ONLY_ON_OUTPUT_STEPS else 0
    assert summary.cpu_tier_load_bytes == read_counters().load_bytes + left_out


@needs_tier
def test_waiting_counts_the_requests_holding_blocks_for_an_async_load():
    """A request whose prefix comes back from the CPU tier gets its blocks and waits for the
    load in 0.33's `kv_holding_waiting`, not in `waiting` (at 0.5 GB/s, for many steps). A
    record's `waiting` counts it: at every step it equals the requests vLLM holds that are
    neither running nor finished, counted from their own status."""
    from engine.session import Session
    from engine.spec import preset_spec

    session = Session(preset_spec(PRESET, offload_bandwidth_gbps=0.5).validated())
    seen: list[tuple[int, int, int]] = []  # (record's waiting, not running nor done, loading)

    def check(item: Any) -> None:
        if type(item) is not V1StepRecord:
            return
        from vllm.v1.request import RequestStatus  # once the engine is built: vLLM's platform

        requests = session.driver.scheduler.requests.values()
        idle = [r for r in requests if not r.is_finished() and r.status != RequestStatus.RUNNING]
        loading = sum(r.status == RequestStatus.WAITING_FOR_REMOTE_KVS for r in idle)
        seen.append((item.waiting, len(idle), loading))

    session.subscribe(check)
    session.run()
    assert sum(1 for _, _, loading in seen if loading) > 100  # loads keep requests waiting
    assert [waiting for waiting, _, _ in seen] == [idle for _, idle, _ in seen]


@needs_tier
def test_two_runs_write_the_same_records_and_the_recording_verifies(tmp_path):
    from engine.analysis.verify import verify_file
    from engine.session import Session
    from engine.spec import preset_spec
    from engine.analysis.summary import SummaryBuilder
    from engine.stream.recorder import Recorder

    path = tmp_path / "tier.jsonl"
    first: list = []
    recorder = Recorder(str(path), fold=SummaryBuilder)
    session = Session(preset_spec(PRESET).validated())
    session.subscribe(first.append)
    session.subscribe(recorder.sink)
    session.run()
    recorder.close()
    a, b = steps_of(first), steps_of(run())

    def without_wall(s: V1StepRecord) -> V1StepRecord:
        return msgspec.structs.replace(s, wall_s=0.0, exec_s=0.0)

    assert [without_wall(s) for s in a] == [without_wall(s) for s in b]
    assert any(s.cpu_evictions for s in a)
    result = verify_file(str(path))
    assert result.ok, result.message
    assert result.steps_checked == len(a)


@needs_tier
def test_the_run_command_reports_the_tier_in_its_json():
    import subprocess

    out = subprocess.run([sys.executable, "-m", "tui.cli", "run", "--preset", PRESET, "--json",
                          "--no-record"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    summary = msgspec.json.decode(out.stdout)
    assert summary["engine"] == "v1" and summary["end_reason"] == "completed"
    assert summary["cpu_tier_hit_tokens"] > 0 and summary["cpu_tier_chunks"] > 0
    for key in ("cpu_tier_loads", "cpu_tier_load_bytes", "cpu_tier_stores",
                "cpu_tier_store_bytes", "cpu_tier_evictions", "peak_cpu_tier_chunks",
                "cpu_tier_wait_seconds"):
        assert key in summary


@needs_tier
def test_a_dry_run_resolves_the_v1_engine_and_its_tier_without_building_it():
    from engine.dry_run import format_text, resolve
    from engine.spec import preset_spec

    data = resolve(preset_spec(PRESET).validated())
    assert (data["engine"], data["vllm_version"]) == ("v1", installed_version())
    assert data["executor_class"] == "engine.adapters.v1.sim_executor.SimExecutor"
    args = data["engine_args"]
    assert (args["kv_connector"], args["kv_offloading_size_gib"]) == ("OffloadingConnector", 0.17)
    assert args["enable_prefix_caching"] and args["num_gpu_blocks_override"] == 200
    assert "kv_connector" in format_text(data)


@needs_tier
def test_a_tier_too_small_for_one_chunk_is_one_line():
    from engine.errors import ConfigError
    from engine.session import Session
    from engine.spec import preset_spec

    with pytest.raises(ConfigError) as error:
        Session(preset_spec(PRESET, kv_offloading_gib=0.0001).validated()).prepare()
    message = str(error.value)
    assert "\n" not in message and "holds no chunk" in message and "at least 0.0006" in message


@needs_tier
def test_the_sim_worker_reports_each_job_once_when_its_bytes_have_moved():
    """The worker's timing on vLLM's own metadata classes: a load of 8 blocks at 1 GB/s
    (8 x 589,824 bytes: 4.7 ms) issued at 0 s is done within a 5 ms step; a store is submitted
    only at the next step's start and queues behind the one before it."""
    from engine.adapters.v1.platform import prepare_sim_process

    prepare_sim_process()  # before vLLM's first import here: it picks its platform once per
    # process, and the engines the other tests build (in any order) need the sim's
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading.common import (
        OffloadingConnectorMetadata, TransferJob)
    from vllm.v1.kv_offload.base import GPULoadStoreSpec
    from vllm.v1.kv_offload.cpu.common import CPULoadStoreSpec

    from engine.adapters.v1.sim_offload_worker import SimOffloadWorker

    block = 589_824

    def gpu(n: int) -> GPULoadStoreSpec:
        return GPULoadStoreSpec(list(range(1, n + 1)), group_sizes=[n], block_indices=[0])

    def cpu(n: int) -> Any:
        return CPULoadStoreSpec(list(range(n)))

    def job(req_id: str, src: Any, dst: Any) -> Any:
        """A TransferJob as the release builds one: (src, dst) in one `transfer_spec` pair on
        0.24, `src_spec` and `dst_spec` from 0.29 (tier_v024)."""
        import dataclasses

        if "transfer_spec" in {f.name for f in dataclasses.fields(TransferJob)}:
            return TransferJob(req_id, (src, dst))
        return TransferJob(req_id, src, dst)

    worker = SimOffloadWorker(block, 1e9)
    worker.min_step_s = lambda: 0.005
    meta = OffloadingConnectorMetadata(
        load_jobs={1: job("a", cpu(8), gpu(8))},
        store_jobs={2: job("b", gpu(16), cpu(16)), 3: job("c", gpu(16), cpu(16))})
    out = worker.step(meta)
    assert out.kv_connector_worker_meta.completed_jobs == {1: 1}
    assert out.finished_recving == {"a"} and out.finished_sending == set()
    assert out.kv_connector_worker_meta.transfer_stats.load.bytes == 8 * block
    empty = OffloadingConnectorMetadata(load_jobs={}, store_jobs={})
    reported: dict[int, int] = {}
    for step in range(1, 10):
        worker.now_s = step * 0.005
        out = worker.step(empty)
        if out is not None:
            for job_id in out.kv_connector_worker_meta.completed_jobs:
                reported[job_id] = step
    # submitted at 5 ms, 9.4 ms each on one stream: done at 14.4 and 23.9 ms
    assert reported == {2: 2, 3: 4}
    assert worker.in_flight == 0


# ---------------------------------------------------------------------- no vLLM needed
def _step(i: int, **over: Any) -> V1StepRecord:
    fields: dict[str, Any] = dict(
        step=i, wall_s=0.001 * (i + 1), sim_s=0.01 * (i + 1), sim_step_s=0.01, policy="off",
        running=1, waiting=0, finished_total=0, gpu_used=10, gpu_total=199, kv_tokens=160,
        batched_tokens=64, token_budget=2048, new=[], resumed=[], scheduled=[("0", 64)],
        preempted=[], prefix_hit_tokens=0, recomputed_tokens=0, prompt_tokens=64,
        generated_tokens=0, decode_reqs=0, first_tokens=[], finished=[], withheld=False,
        held_back=0, computed_total=64 * (i + 1), recomputed_total=0, preemptions_total=0)
    fields.update(over)
    return V1StepRecord(**fields)


def test_a_v1_record_from_before_the_tier_reads_with_no_tier():
    line = encode(_step(3))
    old = msgspec.json.decode(line)
    for key in [k for k in old if k.startswith("cpu_")]:
        del old[key]  # what a recording made before the tier holds
    record = decode_record(msgspec.json.encode(old))
    assert (record.cpu_chunks, record.cpu_chunks_total, record.cpu_load_bytes) == (0, 0, 0)
    assert (record.cpu_used, record.cpu_total, record.cpu_pct) == (0, 0, 0.0)


def test_the_cpu_kv_plot_series_shows_the_tiers_occupancy():
    """The plots read `cpu_pct` through Run.series, which V1 records feed from the tier."""
    from engine.spec import preset_spec
    from engine.stream.run import Run

    header = Header(schema=SCHEMA_VERSION, observatory_version="0.1.0", vllm_version="0.33.0",
                    backend="sim", model="opt-125m", spec=preset_spec(PRESET).to_dict(),
                    engine_config={}, started_at="2026-01-01T00:00:00+00:00", host="test",
                    engine="v1")
    steps = [_step(i, cpu_chunks=min(309, 64 * i), cpu_chunks_total=309) for i in range(8)]
    run_ = Run.from_items([header, *steps, RunFinished(steps=8, reason="completed", sim_s=0.08,
                                                       wall_s=0.008)])
    xs, ys = run_.series("cpu_pct", 0, 7, 8)
    assert list(ys) == pytest.approx([100.0 * min(309, 64 * i) / 309 for i in range(8)])
    assert steps[-1].cpu_pct == 100.0
