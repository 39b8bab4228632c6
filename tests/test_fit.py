"""The fit's pieces: the output-length model, the sim's vLLM-style windows, the error measure,
and a short sim that ends sequences early (deterministically)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.analysis.logs.fit import Target, metric_errors, score
from engine.analysis.logs.simrun import SimResult, rewindow, run_one
from engine.analysis.logs.windows import sim_windows
from engine.costmodel import CostModel
from engine.options import load_config
from engine.output_lengths import LengthSampler, OutputLengths
from engine.spec import RunSpec, preset_spec

import msgspec


def _targets(model: OutputLengths, seed: int = 0, requests: int = 400, n: int = 8):
    sampler = LengthSampler(model, seed)
    return [[sampler.target(str(r), r * n + k) for k in range(n)] for r in range(requests)]


def test_early_share_and_mean_are_what_was_asked() -> None:
    rows = _targets(OutputLengths(early_share=0.3, request_corr=0.0, early_mean_tokens=100))
    lengths = [t for row in rows for t in row if t is not None]
    assert len(lengths) / (len(rows) * 8) == pytest.approx(0.3, abs=0.03)
    assert sum(lengths) / len(lengths) == pytest.approx(101, rel=0.12)
    assert min(lengths) >= 2


def test_request_corr_makes_whole_requests_end_early() -> None:
    rows = _targets(OutputLengths(early_share=0.3, request_corr=1.0, early_mean_tokens=100))
    assert all(all(t is None for t in row) or all(t is not None for t in row) for row in rows)
    share = sum(row[0] is not None for row in rows) / len(rows)
    assert share == pytest.approx(0.3, abs=0.06)


def test_lengths_are_a_function_of_seed_request_and_sequence() -> None:
    model = OutputLengths(early_share=0.5, request_corr=0.3, early_mean_tokens=50)
    assert _targets(model, seed=1) == _targets(model, seed=1)
    assert _targets(model, seed=1) != _targets(model, seed=2)
    # asking in another order gives the same answers
    sampler = LengthSampler(model, 1)
    backwards = {(r, k): sampler.target(str(r), r * 8 + k) for r in reversed(range(400))
                 for k in range(8)}
    assert [[backwards[(r, k)] for k in range(8)] for r in range(400)] == _targets(model, seed=1)


def test_off_by_default() -> None:
    assert not LengthSampler(OutputLengths(), 0).active


def test_windows_close_like_vllms_stat_logger() -> None:
    # steps every 0.9 s, 10 prompt and 100 generated tokens each
    points = [(0.9 * (i + 1), 10, 100, 3, i, 50 - i, 40.0, 1.0 * i) for i in range(20)]
    windows = sim_windows(points)
    # first window: the first step with now - 0 > 5, i.e. step 6 at 5.4 s, 6 steps in it
    assert windows[0].t_s == pytest.approx(5.4)
    assert windows[0].gen_tps == pytest.approx(600 / 5.4, abs=0.05)
    assert windows[0].swapped == 5 and windows[0].pending == 45
    assert windows[1].t_s == pytest.approx(10.8)
    shifted = sim_windows(points, warmup_s=2.0)  # the stats clock started 2 s before step 1
    assert shifted[0].t_s == pytest.approx(3.6)
    assert shifted[0].gen_tps == pytest.approx(400 / 5.6, abs=0.05)


def test_a_sim_compared_with_its_own_windows_has_no_error() -> None:
    points = [(0.02 * (i + 1), 5, 200, 30, i // 50, 900 - i // 10, 80.0, i / 30)
              for i in range(2000)]
    windows = sim_windows(points, 1.5)
    result = SimResult(trace=points, costs=[], windows=[], steps=2000, sim_s=40.0, aborted=True,
                       abort_s=40.0, finished=12, peak_swapped=39, max_swapped_drop=0,
                       running_p50=30, running_max=30)
    target = Target(windows, abort_clock_s=41.5, finished_at_abort=12, warmup_guess_s=1.5,
                    scales={name: 1.0 for name in ("prompt_tps", "gen_tps", "running",
                                                   "swapped", "pending", "gpu_pct",
                                                   "cpu_pct")})
    errors = metric_errors(target, rewindow(result, 1.5), 1.5)
    assert all(value == 0 for value in errors.values()) and score(target, errors) == 0
    worse = metric_errors(target, rewindow(result, 0.5), 0.5)
    assert score(target, worse) > 0


def test_a_short_sim_ends_sequences_early_and_is_deterministic() -> None:
    spec = preset_spec("demo", lengths=OutputLengths(early_share=0.6, request_corr=0.8,
                                                     early_mean_tokens=20))
    raw = run_one(msgspec.json.encode(spec), until_s=1e9)
    result = msgspec.msgpack.decode(raw, type=SimResult)
    assert result.error is None and result.finished > 0
    plain = msgspec.msgpack.decode(run_one(msgspec.json.encode(preset_spec("demo")), 1e9),
                                   type=SimResult)
    # as released, the demo aborts with nothing finished; with early ends the swapped queue
    # drains (swap-ins) and every request finishes
    assert plain.aborted and plain.finished == 0
    assert not result.aborted and result.finished == spec.requests
    assert result.max_swapped_drop > 0
    assert run_one(msgspec.json.encode(spec), until_s=1e9) == raw


FIXTURE = Path(__file__).parent / "fixtures" / "logs" / "v0-metrics.log"


def _fit(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "engine.cli", "fit", str(FIXTURE), "--rounds",
                           "0", "--workers", "1", "--preset", "demo", *flags],
                          cwd=Path(__file__).parent.parent, capture_output=True, text=True,
                          timeout=300)


def test_fit_writes_a_config_that_run_takes(tmp_path) -> None:
    out = tmp_path / "fitted.toml"
    done = _fit("--max-tokens", "64", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "score" in done.stdout and "before:" in done.stdout
    fields = load_config(RunSpec, str(out))  # the same checks `run --config` applies
    assert fields["max_tokens"] == 64 and fields["enable_chunked_prefill"] is True
    # the demo's CPU blocks, not a swap space too: `run --config` refuses both (the docs
    # lane ran the guide's `fit ... && run --config fitted.toml` into that)
    assert fields["num_cpu_blocks"] == 512 and "swap_space_gib" not in fields
    assert set(fields["cost"].__struct_fields__) == set(CostModel.__struct_fields__)
    assert isinstance(fields["lengths"], OutputLengths)


def test_fit_of_a_workload_vllm_refuses_is_one_line_and_writes_nothing(tmp_path) -> None:
    out = tmp_path / "fitted.toml"
    done = _fit("--no-chunked-prefill", "-o", str(out))  # demo's 512-token budget < 2048
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].startswith("observatory: error: the sim of this "
                                                   "workload did not start (vLLM rejected")
    assert "Traceback" not in done.stderr and not out.exists()


# ---- the search ---------------------------------------------------------------------------------

def test_simplex_follows_a_ridge_that_coordinate_steps_cannot() -> None:
    """A narrow valley along x = y: one-parameter moves from (3, 0) stall, the simplex does not."""
    from engine.analysis.logs.simplex import minimize

    def valley(points):
        return [(x - y) ** 2 * 100 + (x + y - 2) ** 2 for x, y in points]

    point, value, evals = minimize(valley, (3.0, 0.0), max_evals=400, tol=1e-4)
    assert point == pytest.approx((1.0, 1.0), abs=0.01) and value < 1e-3
    assert evals <= 400


def test_retiming_a_run_equals_running_it_on_that_clock() -> None:
    """Every request arrives at t=0, so a run re-timed for another cost model (swap and
    eager-prefill terms included) is that cost model's run, step for step."""
    from engine.analysis.logs.retime import retime

    lengths = OutputLengths(early_share=0.4, request_corr=0.5, early_mean_tokens=40)
    slow = CostModel(base_s=0.03, per_prefill_step_s=0.01, per_swap_block_s=2e-4)
    runs = [msgspec.msgpack.decode(run_one(msgspec.json.encode(preset_spec(
        "demo", lengths=lengths, cost=cost)), until_s=1e9), type=SimResult)
        for cost in (CostModel(), slow)]
    retimed = retime(runs[0], slow)
    assert sum(c[2] for c in runs[1].costs) > 0  # the run swapped: the swap term counted
    assert [p[0] for p in retimed.trace] == pytest.approx([p[0] for p in runs[1].trace])
    assert retimed.running_p50 == runs[1].running_p50
    assert rewindow(retimed, 0.5).windows == rewindow(runs[1], 0.5).windows


def test_fit_recovers_the_parameters_of_a_log_the_sim_made() -> None:
    """The demo's stats lines (9 windows, printed as vLLM 0.5 prints them) from known output
    lengths and cost; the fit starts 30-50 % off and must land within 10 % of each."""
    from engine.analysis.logs.fit import Target, fit
    from engine.analysis.logs.fitparams import get_params
    from engine.analysis.logs.importer import import_log
    from engine.analysis.logs.simrun import Runner
    from engine.analysis.logs.synthetic import stats_log

    truth_spec = preset_spec("demo", lengths=OutputLengths(early_share=0.5, request_corr=0.5,
                                                           early_mean_tokens=60),
                             cost=CostModel(base_s=0.02, per_decode_seq_s=1e-3))
    run = msgspec.msgpack.decode(run_one(msgspec.json.encode(truth_spec), 1e9), type=SimResult)
    target = Target.from_log(import_log(stats_log(run, warmup_s=1.0), "synthetic"))
    assert len(target.windows) >= 4
    truth = get_params(truth_spec, 1.0)
    off = {"lengths.early_share": 0.35, "lengths.early_mean_tokens": 90.0,
           "cost.base_s": 0.03, "cost.per_decode_seq_s": 6e-4}
    runner = Runner(1)
    try:
        before, best, _ = fit(target, truth_spec, {**truth, **off}, runner, run.sim_s + 5,
                              rounds=2, free=set(off))
    finally:
        runner.close()
    assert best.score < before.score / 10
    for name in off:
        assert best.values[name] == pytest.approx(truth[name], rel=0.10), name


# ---- V1 pieces that need no vLLM (tests/test_fit_v1.py fits V1 logs in the vllm033 venv) ----

def _v1_run(cost: CostModel, warmup_s: float) -> tuple[SimResult, list]:
    """A made-up V1 run whose batch changes from window to window (phases with and without
    prefill chunks, decodes over contexts that grow and fall), timed by `cost`, and its windows every 2 s from a logger started `warmup_s`
    before the first step."""
    from engine.analysis.logs.retime import retime
    from engine.analysis.logs.v1windows import v1_point_windows

    trace, costs = [], []
    for i in range(4000):
        prompt = 900 if (i // 700) % 2 == 0 and i % 3 == 0 else 0  # prefill phases
        decode = 4 + (i // 50) % 20
        trace.append((0.0, prompt, decode, decode, 3, 50.0, 0))
        context = decode * 150 + 4000 * ((i // 450) % 4)  # long and short requests
        costs.append((prompt, decode, context, 0.0, i // 100))
    result = SimResult(trace=[], costs=[], windows=[], steps=len(trace), sim_s=0.0,
                       aborted=False, abort_s=None, finished=30, peak_swapped=0,
                       max_swapped_drop=0, running_p50=0, running_max=0, engine="v1",
                       v1_trace=trace, v1_costs=costs)
    timed = retime(result, cost)
    return timed, v1_point_windows(timed.v1_trace, warmup_s, 2.0)


def test_the_v1_least_squares_clock_finds_the_coefficients_a_run_was_timed_with() -> None:
    from engine.analysis.logs.clockstart import linear_clock
    from engine.analysis.logs.fitparams import V1

    truth = CostModel(base_s=0.003, per_prefill_token_s=4e-6, per_decode_seq_s=8e-5,
                      per_context_token_s=1e-7)
    timed, windows = _v1_run(truth, 1.5)
    assert len(windows) >= 8
    guess = linear_clock(windows, timed, 2.0, {p.name: (p.lo, p.hi) for p in V1.clock_params})
    assert guess is not None
    # measured: base -8 %, per prompt token -1 %, per decoding request +28 %, per context
    # token -6 %, warm-up +0.02 s (a window ends on a step, not on its time: about one step's
    # time of error per window, which the decode and fixed terms share)
    tolerance = {"base_s": 0.15, "per_prefill_token_s": 0.05, "per_decode_seq_s": 0.4,
                 "per_context_token_s": 0.15}
    for name, rel in tolerance.items():
        assert guess[f"cost.{name}"] == pytest.approx(getattr(truth, name), rel=rel), name
    assert guess["warmup_s"] == pytest.approx(1.5, abs=0.1)
    # and a log with too few windows for five unknowns gives no guess, not a wrong one
    assert linear_clock(windows[:3], timed, 2.0,
                        {p.name: (p.lo, p.hi) for p in V1.clock_params}) is None


def test_v1_windows_of_a_retimed_run_score_zero_against_its_own_log() -> None:
    from engine.analysis.logs.fit import Target, _trial
    from engine.analysis.logs.fitparams import V1

    truth = CostModel(base_s=0.004, per_decode_seq_s=5e-5)
    timed, windows = _v1_run(truth, 1.0)
    target = Target(windows, None, None, 0.0, {m: 1.0 for m in V1.metrics}, V1, 2.0,
                    V1.metrics)
    values = {"cost.base_s": 0.004, "cost.per_decode_seq_s": 5e-5,
              "cost.per_prefill_token_s": truth.per_prefill_token_s,
              "cost.per_context_token_s": truth.per_context_token_s, "warmup_s": 1.0}
    assert _trial(target, timed, values).score == 0
    assert _trial(target, timed, {**values, "cost.base_s": 0.005}).score > 0


def test_a_v1_log_says_its_kv_cache_and_prefix_caching() -> None:
    from engine.analysis.logs.importer import import_log

    log = import_log(
        "INFO 12-04 09:59:40 [core.py:140] Initializing a V1 LLM engine (v0.33.0) with config: "
        "model='m', seed=0, enable_prefix_caching=True, enable_chunked_prefill=True\n"
        "INFO 12-04 09:59:45 [kv_cache_utils.py:1147] GPU KV cache size: 19,200 tokens, "
        "Maximum concurrency for 16,384 tokens per request: 1.17x\n"
        "INFO 12-04 10:00:00 [loggers.py:335] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
        "Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV "
        "cache usage: 5.0%\n", "v1.log")
    assert log.header.engine == "v1" and log.header.vllm_version == "0.33.0"
    assert log.header.engine_config["kv_cache_tokens"] == 19200
    assert log.header.spec["enable_prefix_caching"] is True
