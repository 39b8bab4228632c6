"""Fit the sim to a real log: cost-model coefficients, the output-length model and the warm-up,
so that the sim's 5-s windows (computed as vLLM computes its stats line) match the log's.

The objective compares window k of the sim with window k of the log for every metric of the
stats line, each error scaled by that metric's range in the log (so tokens/s and queue lengths
weigh alike), plus the abort: when it happened on the stats clock and how many requests had
finished by then. A sim that stops having windows (it aborted early) pays for every window it
missed. The search is a coordinate search: each round tries every parameter one step up and one
step down (the candidates of one parameter run in parallel), keeps any improvement, and halves
the steps. It is slow but honest: every score is a real run of vLLM's scheduler.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import msgspec

from engine.analysis.logs.importer import ImportedLog
from engine.analysis.logs.simrun import Runner, SimResult, rewindow
from engine.analysis.logs.timeline import STATS_INTERVAL_S
from engine.analysis.logs.windows import METRICS
from engine.costmodel import CostModel
from engine.output_lengths import OutputLengths
from engine.spec import RunSpec
from engine.stream.records import LogEvent, LogWindow

MISSING_WINDOW_ERROR = 1.0  # scaled error charged per metric for a window the sim never reached


@dataclass
class Target:
    """What the log says, on its stats clock (seconds since the stats logger started)."""

    windows: list[LogWindow]
    abort_clock_s: float | None  # the abort on the stats clock
    finished_at_abort: int | None
    warmup_guess_s: float  # stats clock at the first step, as the log suggests
    scales: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_log(cls, log: ImportedLog) -> "Target":
        windows = [w for w in log.windows]
        first = windows[0].t_s if windows and windows[0].t_s is not None else STATS_INTERVAL_S
        warmup = min(STATS_INTERVAL_S, max(0.0, STATS_INTERVAL_S - first))
        abort = next((r for r in log.records if isinstance(r, LogEvent) and r.event == "abort"),
                     None)
        abort_clock = abort.t_s + warmup if abort and abort.t_s is not None else None
        scales = {}
        for name in METRICS:
            values = [getattr(w, name) for w in windows if getattr(w, name) is not None]
            scales[name] = max(1.0, max(values, default=1.0) - min(values, default=0.0))
        return cls(windows, abort_clock, abort.finished if abort else None, warmup, scales)


# ---- parameters -------------------------------------------------------------------------------

@dataclass
class Param:
    name: str
    lo: float
    hi: float
    log_scale: bool  # steps multiply (True) or add (False)
    step: float  # initial factor (log) or increment (linear)


PARAMS: tuple[Param, ...] = (
    Param("lengths.early_share", 0.0, 1.0, False, 0.2),
    Param("lengths.request_corr", 0.0, 1.0, False, 0.25),
    Param("lengths.early_mean_tokens", 2.0, 1000.0, True, 2.0),
    Param("cost.base_s", 1e-4, 0.05, True, 1.6),
    Param("cost.per_decode_seq_s", 1e-7, 1e-3, True, 1.6),
    Param("cost.per_prefill_token_s", 1e-8, 1e-4, True, 2.0),
    Param("cost.per_context_token_s", 1e-10, 1e-6, True, 2.0),
    Param("warmup_s", 0.0, STATS_INTERVAL_S, False, 1.0),
)


def get_params(spec: RunSpec, warmup_s: float) -> dict[str, float]:
    values = {f"cost.{k}": getattr(spec.cost, k) for k in spec.cost.__struct_fields__}
    values.update({f"lengths.{k}": getattr(spec.lengths, k)
                   for k in spec.lengths.__struct_fields__})
    values["warmup_s"] = warmup_s
    return {p.name: values[p.name] for p in PARAMS}


def apply_params(spec: RunSpec, values: dict[str, float]) -> RunSpec:
    cost = {k[5:]: v for k, v in values.items() if k.startswith("cost.")}
    lengths = {k[8:]: v for k, v in values.items() if k.startswith("lengths.")}
    return msgspec.structs.replace(spec, cost=msgspec.structs.replace(spec.cost, **cost),
                                   lengths=msgspec.structs.replace(spec.lengths, **lengths))


# ---- errors -----------------------------------------------------------------------------------

def metric_errors(target: Target, sim: SimResult, warmup_s: float) -> dict[str, float | None]:
    """Mean absolute error per stats-line metric in its own units, over the log's windows (a
    window the sim never reached counts as the metric's whole range), plus the abort time on
    the stats clock and the requests finished by the end."""
    errors: dict[str, float | None] = {}
    for name in METRICS:
        diffs = []
        for k, real in enumerate(target.windows):
            value = getattr(real, name)
            if value is None:
                continue
            if k < len(sim.windows):
                diffs.append(abs(getattr(sim.windows[k], name) - value))
            else:
                diffs.append(target.scales[name] * MISSING_WINDOW_ERROR)
        errors[name] = sum(diffs) / len(diffs) if diffs else None
    if target.abort_clock_s is not None:
        sim_clock = (sim.abort_s if sim.aborted else sim.sim_s) + warmup_s
        errors["abort_s"] = abs(sim_clock - target.abort_clock_s) + (0 if sim.aborted else 10.0)
    if target.finished_at_abort is not None:
        errors["finished"] = float(abs(sim.finished - target.finished_at_abort))
    return errors


def score(target: Target, errors: dict[str, float | None]) -> float:
    total = 0.0
    for name in METRICS:
        if errors.get(name) is not None:
            total += errors[name] / target.scales[name]
    if errors.get("abort_s") is not None:
        total += 2.0 * errors["abort_s"] / 10.0
    if errors.get("finished") is not None:
        total += errors["finished"] / max(10.0, target.finished_at_abort or 0)
    return total


# ---- search -----------------------------------------------------------------------------------

@dataclass
class Trial:
    values: dict[str, float]
    result: SimResult
    errors: dict[str, float | None]
    score: float


def _moved(param: Param, value: float, step: float, up: bool) -> float:
    moved = value * step if param.log_scale and up else value / step if param.log_scale \
        else value + step if up else value - step
    return min(param.hi, max(param.lo, moved))


PRIOR: dict[str, float] = {
    "lengths.early_share": 0.2, "lengths.request_corr": 0.0, "lengths.early_mean_tokens": 200.0,
    "cost.base_s": 0.008, "cost.per_decode_seq_s": 4e-5,
}
"""Where the search starts when the spec has no output-length model: some sequences end early
and steps are a little slower than the default cost model's. (From the spec's own values, whose
sequences never end early, every neighbour aborts within 16 s and the search has no slope.)"""


def fit(target: Target, base: RunSpec, start: dict[str, float], runner: Runner,
        until_s: float, rounds: int = 3,
        progress: Callable[[str], None] = lambda text: None,
        prior: dict[str, float] | None = None) -> tuple[Trial, Trial, int]:
    """(the trial of `start`, the best trial, sims run). The search starts from `start` updated
    with `prior`, or from `start` if that is better."""
    cache: dict[bytes, SimResult] = {}

    def evaluate(candidates: Sequence[dict[str, float]]) -> list[Trial]:
        """Runs only what is new: the warm-up only changes how windows are cut."""
        specs = [apply_params(base, c) for c in candidates]
        keys = [msgspec.json.encode(spec) for spec in specs]
        todo = [(k, s) for k, s in dict(zip(keys, specs)).items() if k not in cache]
        for (key, _), result in zip(todo, runner.run([s for _, s in todo], until_s)):
            cache[key] = result
        counter[0] += len(todo)
        trials = []
        for c, key in zip(candidates, keys):
            r = rewindow(cache[key], c["warmup_s"])
            errs = metric_errors(target, r, c["warmup_s"])
            trials.append(Trial(dict(c), r, errs, score(target, errs) if not r.error
                                else math.inf))
        return trials

    counter = [0]
    if prior:
        first, primed = evaluate([start, {**start, **prior}])
        best = min((first, primed), key=lambda t: t.score)
    else:
        (first,) = evaluate([start])
        best = first
    progress(f"before: score {first.score:.3f}; search starts at {best.score:.3f}")
    steps = {p.name: p.step for p in PARAMS}
    for round_no in range(rounds):
        for param in PARAMS:
            value = best.values[param.name]
            candidates = []
            for up in (True, False):
                moved = _moved(param, value, steps[param.name], up)
                if moved != value:
                    candidates.append({**best.values, param.name: moved})
            if not candidates:
                continue
            trials = evaluate(candidates)
            winner = min(trials, key=lambda t: t.score)
            if winner.score < best.score:
                best = winner
            progress(f"round {round_no + 1} {param.name}={best.values[param.name]:.4g} "
                     f"score {best.score:.3f}")
        for param in PARAMS:
            steps[param.name] = math.sqrt(steps[param.name]) if param.log_scale \
                else steps[param.name] / 2
    return first, best, counter[0]
