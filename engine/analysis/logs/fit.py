"""Fit the sim to a real log: cost-model coefficients, the output-length model and the warm-up,
so that the sim's 5-s windows (computed as vLLM computes its stats line) match the log's.

The objective compares window k of the sim with window k of the log for every metric of the
stats line, each error scaled by that metric's range in the log (so tokens/s and queue lengths
weigh alike), plus the abort: when it happened on the stats clock and how many requests had
finished by then. A sim that stops having windows (it aborted early) pays for every window it
missed.

The search has two levels, because only one kind of parameter changes what the scheduler does:
- the output-length model decides which sequences end when, so each candidate is a real sim of
  vLLM's scheduler (run in parallel, `Runner`); a Nelder-Mead simplex over its three numbers
  (engine.analysis.logs.simplex), from the best of a few distinct starting shapes;
- the cost model and the warm-up only say how long the steps took: for each length candidate
  they are fitted by re-timing its one run (engine.analysis.logs.retime), which costs
  milliseconds, not a sim. Coefficients that the windows cannot tell apart (a fixed cost per
  step and a cost per sequence, at a batch that is always full) lean weakly towards the default
  cost model instead of drifting.
The fitted parameters are run once more as an ordinary sim, so the figures printed are a run's,
not a re-timing's.

A V1 log (vLLM 0.11+, header `engine: "v1"`) is fitted by the same two levels with V1's own
`FitKind`: its 10-s windows (the interval the log shows) of one data-parallel engine; its
metrics (waiting instead of swapped and pending, preemptions per window; no abort, V1 preempts by
recompute); the length model is the V1 workload's own (each request ends at a max_tokens drawn
from [min_tokens, max_tokens]), each candidate a sim of vLLM 0.33's real scheduler; the clock
is the terms the V1 adapter charges (engine.adapters.v1.step_record), leaning towards the
default cost model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Collection, Sequence


from engine.analysis.logs.clockstart import linear_clock
from engine.analysis.logs.fitparams import FIT_KINDS, V0, FitKind, Param, apply_params
from engine.analysis.logs.importer import ImportedLog
from engine.analysis.logs.retime import finished_by, retime
from engine.analysis.logs.simplex import minimize
from engine.analysis.logs.simrun import Runner, SimResult, rewindow
from engine.analysis.logs.timeline import STATS_INTERVAL_S
from engine.analysis.logs.windows import METRICS
from engine.costmodel import CostModel
from engine.errors import ConfigError
from engine.kinds import kind_of
from engine.spec import RunSpec
from engine.stream.records import LogEvent, LogWindow

MISSING_WINDOW_ERROR = 1.0  # scaled error charged per metric for a window the sim never reached
PRIOR_WEIGHT = 0.02  # score added per squared decade a coefficient sits from the kind's prior
STOP_MARGIN = 1.5  # sims run this much past the log's end on their own clock, for re-timing


# ---- the log as a target ------------------------------------------------------------------

@dataclass
class Target:
    """What the log says, on its stats clock (seconds since the stats logger started)."""

    windows: list[LogWindow]
    abort_clock_s: float | None  # the abort on the stats clock
    finished_at_abort: int | None
    warmup_guess_s: float  # stats clock at the first step, as the log suggests
    scales: dict[str, float] = field(default_factory=dict)
    kind: FitKind = V0
    interval_s: float = STATS_INTERVAL_S  # the log's stats interval (V1: as the log shows it)
    metrics: tuple[str, ...] = METRICS  # the kind's metrics the log has values for

    @classmethod
    def from_log(cls, log: ImportedLog, engine: int | None = None) -> "Target":
        """The log's windows (V1 data parallel: engine `engine`'s, see `v1_engine`)."""
        kind = FIT_KINDS[kind_of(log.header.engine).name]
        engine = v1_engine(log, engine) if kind.data_parallel else None
        windows = [w for w in log.windows if not kind.data_parallel or w.engine == engine]
        interval = float(log.header.engine_config.get("stats_interval_s", kind.interval_s)) \
            if kind.interval_logged else STATS_INTERVAL_S
        first = windows[0].t_s if windows and windows[0].t_s is not None else interval
        warmup = min(interval, max(0.0, interval - first))
        abort = next((r for r in log.records if isinstance(r, LogEvent) and r.event == "abort"),
                     None)
        abort_clock = abort.t_s + warmup if abort and abort.t_s is not None else None
        scales = {}
        metrics = []
        for name in kind.metrics:
            values = [v for w in windows if (v := window_value(w, name, kind)) is not None]
            scales[name] = max(1.0, max(values, default=1.0) - min(values, default=0.0))
            if kind.fields_by_release and not any(getattr(w, name) is not None
                                                  for w in windows):
                continue  # this log (its release) never logs it: not fitted, not a guess
            metrics.append(name)
        return cls(windows, abort_clock, abort.finished if abort else None, warmup, scales,
                   kind, interval, tuple(metrics))


def v1_engine(log: ImportedLog, engine: int | None) -> int | None:
    """The data-parallel engine whose series a V1 fit takes: `engine` if the log has it (else
    a ConfigError naming those it has), by default the lowest index (the aggregated line, -1,
    only when there is nothing else); None for a log without `Engine NNN:` prefixes."""
    engines = sorted({w.engine for w in log.windows if w.engine is not None})
    if engine is None:
        return min((e for e in engines if e >= 0), default=engines[0] if engines else None)
    if engine not in engines:
        raise ConfigError(f"the log has no engine {engine} (it has "
                          f"{', '.join(map(str, engines)) or 'no Engine NNN: prefixes'}): "
                          f"give --reference-engine one of those")
    return engine


def window_value(window: LogWindow, name: str, kind: FitKind) -> float | None:
    """A window's metric. V1 logs its preemptions only when there were some, so in a log that
    shows the field at all (Target.from_log) a window without it had none (a field cut
    mid-value stays unknown)."""
    value = getattr(window, name)
    if value is None and name in kind.zero_when_absent and name not in window.missing:
        return 0
    return value


# ---- errors -----------------------------------------------------------------------------------

def metric_errors(target: Target, sim: SimResult, warmup_s: float) -> dict[str, float | None]:
    """Mean absolute error per stats-line metric in its own units, over the log's windows (a
    window the sim never reached counts as the metric's whole range; on V1, past the end of a
    run that ran out of work, as the window of an idle engine, all zeros, if that is more),
    plus the abort time on the stats clock and the requests finished by the end.

    (Why the idle window: against a log whose windows no candidate matches, the whole range
    can cost less than any match, and the clock search would then shrink the run until it has
    no window at all.)"""
    errors: dict[str, float | None] = {}
    for name in target.metrics:
        diffs = []
        for k, real in enumerate(target.windows):
            value = window_value(real, name, target.kind)
            if value is None:
                continue
            if k < len(sim.windows):
                diffs.append(abs((window_value(sim.windows[k], name, target.kind) or 0)
                                 - value))
            else:
                missing = target.scales[name] * MISSING_WINDOW_ERROR
                diffs.append(max(missing, abs(value)) if sim.complete else missing)
        errors[name] = sum(diffs) / len(diffs) if diffs else None
    if target.abort_clock_s is not None:
        sim_clock = (sim.abort_s if sim.aborted else sim.sim_s) + warmup_s
        errors["abort_s"] = abs(sim_clock - target.abort_clock_s) + (0 if sim.aborted else 10.0)
    if target.finished_at_abort is not None:
        done = sim.finished if sim.aborted or target.abort_clock_s is None else \
            finished_by(sim, target.abort_clock_s - warmup_s)
        errors["finished"] = float(abs(done - target.finished_at_abort))
    return errors


def score(target: Target, errors: dict[str, float | None]) -> float:
    total = 0.0
    for name in target.metrics:
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


def _cost(values: dict[str, float]) -> CostModel:
    return CostModel(**{k[5:]: v for k, v in values.items() if k.startswith("cost.")})


def _trial(target: Target, run: SimResult, values: dict[str, float]) -> Trial:
    """`run` on the clock of `values`' cost model and warm-up, scored against the log."""
    if run.error:
        return Trial(dict(values), run, {}, math.inf)
    timed = rewindow(retime(run, _cost(values)), values["warmup_s"], target.interval_s)
    errors = metric_errors(target, timed, values["warmup_s"])
    return Trial(dict(values), timed, errors, score(target, errors))


def _leaning(trial: Trial, params: Sequence[Param], prior_model: CostModel) -> float:
    """The score the clock search minimises: the fit's, plus a small pull of the coefficients
    it moves (`params`) towards `prior_model` (the kind's CLOCK_PRIOR)."""
    pull = 0.0
    for param in params:
        if param.log_scale:
            prior = getattr(prior_model, param.name[5:])
            pull += math.log10(trial.values[param.name] / prior) ** 2
    return trial.score + PRIOR_WEIGHT * pull


def fit_clock(target: Target, run: SimResult, values: dict[str, float],
              params: Sequence[Param] | None = None, restarts: int = 3) -> Trial:
    """The cost model and warm-up that best time `run` against the log: a simplex over `params`
    (a fixed cost per step and a cost per sequence trade off along a ridge), restarted from
    its best point with a fresh simplex `restarts` times. `params` defaults to the kind's."""
    params = target.kind.clock_params if params is None else params
    prior = target.kind.clock_prior
    values = {**values, **{p.name: min(p.hi, max(p.lo, values[p.name])) for p in params}}
    best = _trial(target, run, values)
    if run.error or not params:
        return best
    if target.kind.rugged_score:  # start from the least-squares clock too
        guess = linear_clock(target.windows, run, target.interval_s,
                             {p.name: (p.lo, p.hi) for p in target.kind.clock_params})
        if guess is not None:
            moved = {k: v for k, v in guess.items() if k in {p.name for p in params}}
            trial = _trial(target, run, {**values, **moved})
            if _leaning(trial, params, prior) < _leaning(best, params, prior):
                best = trial

    def batch(points: Sequence[tuple[float, ...]]) -> list[float]:
        nonlocal best
        scores = []
        for point in points:
            trial = _trial(target, run, {**best.values, **{p.name: _from_unit(p, u)
                                                           for p, u in zip(params, point)}})
            if _leaning(trial, params, prior) < _leaning(best, params, prior):
                best = trial
            scores.append(_leaning(trial, params, prior))
        return scores

    for _ in range(restarts):
        start = tuple(_to_unit(p, best.values[p.name]) for p in params)
        minimize(batch, start, max_evals=60 * len(params), tol=0.01,
                 first=_leaning(best, params, prior))
    return best


def _to_unit(param: Param, value: float) -> float:
    """The simplex's coordinate of `value`: one unit is one initial step of `param`."""
    if param.log_scale:
        return math.log(max(value, param.lo)) / math.log(param.step)
    return value / param.step


def _from_unit(param: Param, unit: float) -> float:
    value = param.step ** unit if param.log_scale else unit * param.step
    return min(param.hi, max(param.lo, value))


Values = dict[str, float]  # parameter name (a FitKind's params) -> value


def search_lengths(best: Trial, params: Sequence[Param],
                   evaluate: Callable[[Sequence[Values], Values], list[Trial]],
                   clock_of: Callable[[Values], Values], rounds: int,
                   progress: Callable[[str], None]) -> Trial:
    """Nelder-Mead (engine.analysis.logs.simplex) over the output-length model from `best`,
    every candidate's clock fitted from the best clock so far; about 5 x rounds sims per
    parameter."""
    trials: list[Trial] = [best]

    def batch(points: Sequence[tuple[float, ...]]) -> list[float]:
        clock = clock_of(min(trials, key=lambda t: t.score).values)
        candidates = [{**trials[0].values, **{p.name: _from_unit(p, u)
                                              for p, u in zip(params, point)}}
                      for point in points]
        found = evaluate(candidates, clock)
        trials.extend(found)
        leader = min(trials, key=lambda t: t.score)
        progress(f"sims {len(trials) - 1}: best score {leader.score:.3f} at "
                 + ", ".join(f"{p.name.split('.')[-1]}={leader.values[p.name]:.4g}"
                             for p in params))
        return [t.score for t in found]

    start = tuple(_to_unit(p, best.values[p.name]) for p in params)
    minimize(batch, start, max_evals=5 * rounds * len(params), first=best.score)
    return min(trials, key=lambda t: t.score)


def _lengths_key(values: dict[str, float], kind: FitKind) -> tuple[float, ...]:
    return tuple(values[p.name] for p in kind.length_params)


def fit(target: Target, base: RunSpec, start: dict[str, float], runner: Runner,
        until_s: float, rounds: int = 3,
        progress: Callable[[str], None] = lambda text: None,
        starts: Sequence[dict[str, float]] = (),
        free: Collection[str] | None = None) -> tuple[Trial, Trial, int]:
    """(the trial of `start` as given, the best trial, sims run). The length search
    (`search_lengths`) starts from the best of `start` and `start` updated with each of
    `starts`; every length candidate's clock is fitted by `fit_clock`. The best is run again as
    an ordinary sim for its figures.
    `free` names the parameters to fit (default all of the target's kind); the others keep
    `start`'s."""
    kind = target.kind
    length_params = [p for p in kind.length_params if free is None or p.name in free]
    clock_params = [p for p in kind.clock_params if free is None or p.name in free]
    runs: dict[tuple[float, ...], SimResult] = {}
    counter = [0]

    def simulate(candidates: Sequence[dict[str, float]]) -> None:
        todo = {_lengths_key(c, kind): c for c in candidates if _lengths_key(c, kind) not in runs}
        specs = [apply_params(base, c) for c in todo.values()]
        for key, result in zip(todo, runner.run(specs, until_s * STOP_MARGIN)):
            runs[key] = result
        counter[0] += len(todo)

    def evaluate(candidates: Sequence[dict[str, float]],
                 clocks: Sequence[dict[str, float]]) -> list[Trial]:
        """Each candidate's lengths, with its clock fitted from each of `clocks`, the best kept
        (a clock fitted to other lengths alone can hold the search at a bound)."""
        simulate(candidates)
        distinct = [c for i, c in enumerate(clocks) if c not in clocks[:i]]
        return [min((fit_clock(target, runs[_lengths_key(c, kind)], {**c, **clock},
                               params=clock_params) for clock in distinct),
                    key=lambda t: t.score)
                for c in candidates]

    def clock_of(values: dict[str, float]) -> dict[str, float]:
        return {p.name: values[p.name] for p in kind.clock_params}

    # `start` keeps its own clock; the other openings start from the kind's CLOCK_PRIOR
    prior_clock = {**clock_of(start), **{p.name: getattr(kind.clock_prior, p.name[5:])
                                         for p in clock_params if p.name.startswith("cost.")}}
    openings = [(start, clock_of(start)), *(({**start, **s}, prior_clock) for s in starts)]
    simulate([values for values, _ in openings])
    before = _trial(target, runs[_lengths_key(start, kind)], start)
    best, opening_clock = min(((evaluate([values], [clock])[0], clock)
                               for values, clock in openings), key=lambda pair: pair[0].score)
    progress(f"before: score {before.score:.3f}; search starts at {best.score:.3f}")
    if length_params and rounds > 0:
        best = search_lengths(best, length_params,
                              lambda cs, clock: evaluate(cs, [clock, opening_clock]), clock_of,
                              rounds, progress)
    # the figures of the fitted spec, from a run of it (a re-timing is exact only when every
    # request arrives at t=0)
    (final,) = runner.run([apply_params(base, best.values)], until_s * STOP_MARGIN)
    counter[0] += 1
    return before, _trial(target, final, best.values), counter[0]
