"""One short sim for the fit: a headless Session stopped at a simulated time, returning only what
the fit compares (its 5-s windows, the abort, finished requests, swap figures; on the V1 engine
its 10-s windows, preemptions and recompute).

Why not the sweep runner's `run_cell`: the fit needs the per-step record stream (to compute
windows the way vLLM does) and a stop at a simulated time, while a sweep cell returns a summary
or a whole recording and stops at --max-steps. The candidates of one fit round run in a small
process pool (`run_many`); each worker imports vLLM once.
"""

from __future__ import annotations

import multiprocessing
from typing import Sequence

import msgspec

from engine.analysis.logs.v1windows import V1Point, v1_point_windows, v1_points
from engine.analysis.logs.windows import Point, points, sim_windows
from engine.errors import one_line
from engine.spec import RunSpec
from engine.stream.records import EngineAborted, LogWindow, StepRecord, V1StepRecord


LATE_S = 10.0  # "steady state": running groups are summarised from this simulated second on

StepCost = tuple[int, int, int, int]
"""What the cost model charges one step for, besides its prompt tokens (in its Point): decode
sequences, cached tokens, swapped blocks; and the requests finished by the end of the step."""

V1StepCost = tuple[int, int, int, float, int]
"""What the cost model charges one V1 step for (engine.adapters.v1.step_record): prompt tokens
scheduled (recompute included, unlike its V1Point's), decoding requests, the running requests'
computed tokens, the seconds it waited for CPU-tier transfers; and requests finished by its end."""


class SimResult(msgspec.Struct, kw_only=True):
    trace: list[Point]  # per step, what windows need (so a new warm-up needs no new run)
    costs: list[StepCost]  # per step, what a new cost model needs (engine.analysis.logs.retime)
    windows: list[LogWindow]
    steps: int
    sim_s: float
    aborted: bool
    abort_s: float | None
    finished: int  # requests finished by the end (by the abort, if it aborted)
    peak_swapped: int
    max_swapped_drop: int  # the largest fall of the swapped queue before it rose again
    running_p50: float  # median running groups over steps after the first 10 s
    running_max: int
    error: str | None = None
    engine: str = "v0"  # "v1": the run's steps are in v1_trace / v1_costs, not trace / costs
    v1_trace: list[V1Point] = []
    v1_costs: list[V1StepCost] = []
    preemptions: int = 0  # V1: recompute preemptions by the end
    max_preemptions: int = 0  # V1: the most preemptions of one request
    recomputed: int = 0  # V1: tokens computed again after a preemption
    computed: int = 0  # V1: tokens scheduled
    complete: bool = False  # V1: it ran out of work (not stopped at the fit's time limit)

    @property
    def recompute_tax(self) -> float:
        return self.recomputed / self.computed if self.computed else 0.0


def _drop(series: Sequence[int]) -> int:
    best, peak = 0, 0
    for value in series:
        peak = max(peak, value)
        best = max(best, peak - value)
    return best


def steady_running(trace: Sequence[Point] | Sequence[V1Point]) -> tuple[float, int]:
    """(median, max) running groups (V1: requests) over the steps from LATE_S on (0, 0 if
    none)."""
    late = sorted(p[3] for p in trace if p[0] >= LATE_S) or [0]
    return float(late[len(late) // 2]), max(late)


def run_one(spec_json: bytes, until_s: float) -> bytes:
    from engine import logs
    from engine.session import Session

    spec = msgspec.json.decode(spec_json, type=RunSpec)
    logs.drain()
    steps: list[StepRecord | V1StepRecord] = []
    abort: list[EngineAborted] = []
    try:
        session = Session(spec)
        session.prepare()
    except Exception as exc:  # a bad candidate fails, the fit goes on
        return msgspec.msgpack.encode(SimResult(
            trace=[], costs=[], windows=[], steps=0, sim_s=0.0, aborted=False, abort_s=None,
            finished=0, peak_swapped=0, max_swapped_drop=0, running_p50=0.0, running_max=0,
            error=one_line(exc)[:300]))
    stopping = [False]

    def sink(item: object) -> None:
        if isinstance(item, (StepRecord, V1StepRecord)):
            steps.append(item)
            if item.sim_s > until_s and not stopping[0]:
                stopping[0] = True
                session.stop()
        elif isinstance(item, EngineAborted):
            abort.append(item)

    session.subscribe(sink)
    session.run()
    if steps and isinstance(steps[0], V1StepRecord):
        result = _v1_result(steps)  # type: ignore[arg-type]
        result.complete = not stopping[0]
        return msgspec.msgpack.encode(result)
    swapped = [s.swapped for s in steps] + [a.swapped for a in abort]
    block_size = spec.block_size
    costs: list[StepCost] = []
    finished = 0
    for s in steps:
        finished += len(s.finished) - len(s.ignored)
        costs.append((s.decode_seqs, s.gpu_used * block_size, s.swap_blocks, finished))
    trace = points(steps)
    running_p50, running_max = steady_running(trace)
    result = SimResult(
        trace=trace, costs=costs, windows=[], steps=len(steps),
        sim_s=steps[-1].sim_s if steps else 0.0, aborted=bool(abort),
        abort_s=abort[0].sim_s if abort else None,
        finished=finished,
        peak_swapped=max(swapped, default=0), max_swapped_drop=_drop(swapped),
        running_p50=running_p50, running_max=running_max)
    return msgspec.msgpack.encode(result)


def _v1_result(steps: list[V1StepRecord]) -> SimResult:
    """A V1 run: no swap and no abort (V1 preempts by recompute); its preemptions instead."""
    trace = v1_points(steps)
    costs: list[V1StepCost] = [(s.prompt_tokens, s.decode_reqs, s.kv_tokens, s.cpu_wait_s,
                                s.finished_total) for s in steps]
    running_p50, running_max = steady_running(trace)
    most: dict[str, int] = {}
    for s in steps:
        for rid, _, count in s.preempted:
            most[rid] = max(most.get(rid, 0), count)
    last = steps[-1]
    return SimResult(
        trace=[], costs=[], windows=[], steps=len(steps), sim_s=last.sim_s, aborted=False,
        abort_s=None, finished=last.finished_total, peak_swapped=0, max_swapped_drop=0,
        running_p50=running_p50, running_max=running_max, engine="v1", v1_trace=trace,
        v1_costs=costs, preemptions=last.preemptions_total,
        max_preemptions=max(most.values(), default=0), recomputed=last.recomputed_total,
        computed=last.computed_total)


def rewindow(result: SimResult, warmup_s: float, interval_s: float | None = None) -> SimResult:
    """`result` with the windows its stats logger would have printed (V0: every 5 s; V1: every
    `interval_s`, vLLM's default 10 s)."""
    windows = WINDOWS[result.engine](result, warmup_s, interval_s)
    return msgspec.structs.replace(result, windows=windows)


def _v0_windows(result: SimResult, warmup_s: float, interval_s: float | None) -> list:
    return sim_windows(result.trace, warmup_s)


def _v1_windows(result: SimResult, warmup_s: float, interval_s: float | None) -> list:
    return (v1_point_windows(result.v1_trace, warmup_s, interval_s)
            if interval_s is not None else v1_point_windows(result.v1_trace, warmup_s))


WINDOWS = {"v0": _v0_windows, "v1": _v1_windows}
"""Each kind's stats windows of a sim, from its own trace (V0's `trace`, V1's `v1_trace`)."""


def _call(args: tuple[bytes, float]) -> bytes:
    return run_one(*args)


class Runner:
    """A pool of `workers` processes (spawned: a clean vLLM import in each), or this process."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool = (multiprocessing.get_context("spawn").Pool(workers)
                      if workers > 1 else None)

    def run(self, specs: Sequence[RunSpec], until_s: float) -> list[SimResult]:
        """Runs without windows: `rewindow` them for a warm-up."""
        jobs = [(msgspec.json.encode(spec), until_s) for spec in specs]
        raw = self._pool.map(_call, jobs) if self._pool else [_call(job) for job in jobs]
        return [msgspec.msgpack.decode(r, type=SimResult) for r in raw]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
