"""Does `observatory fit` find parameters it can find? Make a "real" log from the sim itself with
known parameters (its 5-s windows printed as vLLM prints them, plus the abort), start the fit
from perturbed values, and print each fitted parameter against the truth.

    python bench/fit_recovery.py [--rounds 2] [--workers 2]

Prints one line per parameter (truth, start, fitted, error %) and the score before and after.
"""

from __future__ import annotations

import argparse

import msgspec

from engine.analysis.logs.fit import PARAMS, Target, apply_params, fit, get_params
from engine.analysis.logs.importer import import_log
from engine.analysis.logs.simrun import Runner, SimResult, run_one
from engine.analysis.logs.windows import sim_windows
from engine.costmodel import CostModel
from engine.output_lengths import OutputLengths
from engine.spec import preset_spec

TRUTH = preset_spec("seed-5578", num_cpu_blocks=7281,
                    lengths=OutputLengths(early_share=0.3, request_corr=0.3,
                                          early_mean_tokens=150),
                    cost=CostModel(base_s=0.008, per_decode_seq_s=4e-5))
PERTURB = {"lengths.early_share": 0.45, "lengths.early_mean_tokens": 250.0,
           "cost.base_s": 0.011, "cost.per_decode_seq_s": 3e-5}


def clock(t: float) -> str:
    seconds = 10 * 3600 + t
    return f"06-16 {int(seconds // 3600):02d}:{int(seconds // 60 % 60):02d}:{seconds % 60:06.3f}"


def log_text(result: SimResult) -> str:
    lines = []
    for w in sim_windows(result.trace):
        lines.append(f"INFO {clock(w.t_s)} metrics.py:341] Avg prompt throughput: "
                     f"{w.prompt_tps:.1f} tokens/s, Avg generation throughput: {w.gen_tps:.1f} "
                     f"tokens/s, Running: {w.running} reqs, Swapped: {w.swapped} reqs, Pending: "
                     f"{w.pending} reqs, GPU KV cache usage: {w.gpu_pct:.1f}%, CPU KV cache "
                     f"usage: {w.cpu_pct:.1f}%.")
    if result.aborted:
        lines.append(f"ERROR {clock(result.abort_s)} llm_engine.py:1] RuntimeError: Aborted due "
                     f"to the lack of CPU swap space.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    truth_run = msgspec.msgpack.decode(run_one(msgspec.json.encode(TRUTH), 40.0),
                                       type=SimResult)
    log = import_log(log_text(truth_run), "synthetic")
    target = Target.from_log(log)
    truth = get_params(TRUTH, 0.0)
    start = {**truth, **PERTURB}
    runner = Runner(args.workers)
    try:
        before, best, sims = fit(target, TRUTH, start, runner, 40.0, args.rounds,
                                 progress=print)
    finally:
        runner.close()
    print(f"truth aborted at {truth_run.abort_s} s; {sims} sims; score {before.score:.3f} -> "
          f"{best.score:.3f}")
    for param in PARAMS:
        t, s, f = truth[param.name], start[param.name], best.values[param.name]
        err = abs(f - t) / t * 100 if t else abs(f - t)
        print(f"{param.name:28s} truth {t:<10.4g} start {s:<10.4g} fitted {f:<10.4g} "
              f"error {err:.0f}{'%' if t else ''}")
    assert apply_params(TRUTH, best.values) is not None


if __name__ == "__main__":
    main()
