"""Does `observatory fit` find parameters it can find, at the seed's scale? Make a "real" log from
the sim itself with known parameters (the `seed-5578-fitted` preset: its 5-s windows printed as
vLLM prints them, plus the abort), start the fit well off, and print each fitted parameter
against the truth (shares start 0.3-0.4 off, the rest 40-75 % off). tests/test_fit.py does
the same on the demo preset, in CI.

    python bench/fit_recovery.py [--rounds 2] [--workers 2] [--all] [--openings]

By default the fit is free in the three output-length numbers and two cost coefficients (the
others stay at the truth); --all frees every parameter, which shows what the windows cannot
tell apart. --openings also starts the length search from fit's LENGTH_STARTS shapes, as `fit`
does for a spec without an output-length model. Prints one line per parameter (truth, start,
fitted, error %) and the scores.
"""

from __future__ import annotations

import argparse
import time

import msgspec

from engine.analysis.logs.fit import Target, fit
from engine.analysis.logs.fitparams import LENGTH_STARTS, PARAMS, get_params
from engine.analysis.logs.importer import import_log
from engine.analysis.logs.simrun import Runner, SimResult, run_one
from engine.analysis.logs.synthetic import stats_log
from engine.spec import preset_spec

TRUTH = preset_spec("seed-5578-fitted")
WARMUP_S = 2.0
PERTURB = {"lengths.early_share": 0.6, "lengths.request_corr": 0.4,
           "lengths.early_mean_tokens": 3500.0, "cost.base_s": 0.013,
           "cost.per_decode_seq_s": 1.3e-5}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--all", action="store_true", help="free every parameter")
    parser.add_argument("--openings", action="store_true",
                        help="also start from fit's LENGTH_STARTS shapes")
    args = parser.parse_args()
    started = time.monotonic()
    truth_run = msgspec.msgpack.decode(run_one(msgspec.json.encode(TRUTH), 80.0),
                                       type=SimResult)
    target = Target.from_log(import_log(stats_log(truth_run, WARMUP_S), "synthetic"))
    truth = get_params(TRUTH, WARMUP_S)
    start = {**truth, **PERTURB}
    free = None if args.all else set(PERTURB)
    runner = Runner(args.workers)
    try:
        before, best, sims = fit(target, TRUTH, start, runner,
                                 (truth_run.abort_s or truth_run.sim_s) + 5.0, args.rounds,
                                 progress=lambda text: print(text, flush=True), free=free,
                                 starts=LENGTH_STARTS if args.openings else ())
    finally:
        runner.close()
    print(f"truth: {len(target.windows)} windows, abort at {truth_run.abort_s:.1f} s; {sims} sims "
          f"in {time.monotonic() - started:.0f} s; score {before.score:.3f} -> {best.score:.3f}")
    print_recovery([p for p in PARAMS if free is None or p.name in free], truth, start,
                   best.values)


def print_recovery(params, truth: dict, start: dict, fitted: dict) -> None:
    """One line per parameter: the truth, where the fit started, what it found, the error."""
    for param in params:
        t, s, f = truth[param.name], start[param.name], fitted[param.name]
        err = f"{abs(f - t) / t * 100:.1f} %" if t else f"{abs(f - t):.3g} (absolute)"
        print(f"{param.name:28s} truth {t:<10.4g} start {s:<10.4g} fitted {f:<10.4g} "
              f"error {err}")


if __name__ == "__main__":
    main()
