"""Does `observatory fit` find a V1 sim's parameters from its own V1 log? (vllm033 venv,
PYTHONHASHSEED=0.) Make a "real" log from a sim of vLLM 0.33's scheduler with known values (a
cost model that is not the default, a warm-up, and an output-length draw), printed as 0.33's
LoggingStatLogger prints it; start the fit from the default cost model and a length draw that
is off; print each fitted parameter against the truth, the scores and the time it took.
tests/test_fit_v1.py does the clock part (`--rounds 0`) in CI.

    PYTHONHASHSEED=0 python bench/fit_recovery_v1.py [--rounds 2] [--workers 2] [--thrash]

The default workload is the test's (96 requests of 256-1,024 prompt tokens and 256-1,024 output
tokens, windows every 2 s, VLLM_LOG_STATS_INTERVAL=2). --thrash fits v1-thrash itself with
0.33's 10-s windows instead: nearly every step there is one 512-token prefill chunk, which shows
what such windows cannot tell apart.
"""

from __future__ import annotations

import argparse
import time

import msgspec

from engine.analysis.logs.fit import Target, fit
from engine.analysis.logs.fitparams import V1, get_params
from engine.analysis.logs.importer import import_log
from engine.analysis.logs.simrun import Runner, SimResult, run_one
from engine.analysis.logs.v1windows import stats_log, v1_point_windows
from engine.costmodel import CostModel
from engine.spec import preset_spec
from fit_recovery import print_recovery  # bench/, the script's own directory

COST = CostModel(base_s=0.003, per_prefill_token_s=4e-6, per_decode_seq_s=8e-5,
                 per_context_token_s=1e-7)
WORKLOAD = dict(requests=96, prompt_len=256, prompt_len_max=1024, min_tokens=256,
                max_tokens=1024, max_num_batched_tokens=1024, scheduler_reserve_full_isl=True)
WARMUP_S = 1.0
PERTURB = {"workload.max_tokens": 1536.0, "workload.min_share": 0.5}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--thrash", action="store_true",
                        help="v1-thrash with 10-s windows instead of the test's workload")
    args = parser.parse_args()
    truth_spec = preset_spec("v1-thrash", cost=COST, **({} if args.thrash else WORKLOAD))
    interval = 10.0 if args.thrash else 2.0
    started = time.monotonic()
    truth_run = msgspec.msgpack.decode(run_one(msgspec.json.encode(truth_spec), 1e6),
                                       type=SimResult)
    log = stats_log(v1_point_windows(truth_run.v1_trace, WARMUP_S, interval))
    target = Target.from_log(import_log(log, "synthetic-v1"))
    truth = get_params(truth_spec, WARMUP_S, V1)
    base = msgspec.structs.replace(truth_spec, cost=CostModel())
    start = {**get_params(base, 0.0, V1), **PERTURB}
    runner = Runner(args.workers)
    try:
        before, best, sims = fit(target, base, start, runner, truth_run.sim_s + 2 * interval,
                                 args.rounds, progress=lambda text: print(text, flush=True))
    finally:
        runner.close()
    print(f"truth: {len(target.windows)} windows of {interval:g} s, {truth_run.steps} steps, "
          f"{truth_run.sim_s:.1f} sim s; {sims} sims in {time.monotonic() - started:.0f} s; "
          f"score {before.score:.3f} -> {best.score:.3f}; fitted run {best.result.sim_s:.1f} "
          f"sim s")
    print_recovery(V1.params, truth, start, best.values)


if __name__ == "__main__":
    main()
