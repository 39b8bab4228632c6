"""One short sim for the fit: a headless Session stopped at a simulated time, returning only what
the fit compares (its 5-s windows, the abort, finished requests, swap figures).

Why not the sweep runner's `run_cell`: the fit needs the per-step record stream (to compute
windows the way vLLM does) and a stop at a simulated time, while a sweep cell returns a summary
or a whole recording and stops at --max-steps. The candidates of one fit round run in a small
process pool (`run_many`); each worker imports vLLM once.
"""

from __future__ import annotations

import multiprocessing
from typing import Sequence

import msgspec

from engine.analysis.logs.windows import Point, points, sim_windows
from engine.errors import one_line
from engine.spec import RunSpec
from engine.stream.records import EngineAborted, LogWindow, StepRecord


LATE_S = 10.0  # "steady state": running groups are summarised from this simulated second on

StepCost = tuple[int, int, int, int]
"""What the cost model charges one step for, besides its prompt tokens (in its Point): decode
sequences, cached tokens, swapped blocks; and the requests finished by the end of the step."""


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


def _drop(series: Sequence[int]) -> int:
    best, peak = 0, 0
    for value in series:
        peak = max(peak, value)
        best = max(best, peak - value)
    return best


def steady_running(trace: Sequence[Point]) -> tuple[float, int]:
    """(median, max) running groups over the steps from LATE_S on (0, 0 if none)."""
    late = sorted(p[3] for p in trace if p[0] >= LATE_S) or [0]
    return float(late[len(late) // 2]), max(late)


def run_one(spec_json: bytes, until_s: float) -> bytes:
    from engine import logs
    from engine.session import Session

    spec = msgspec.json.decode(spec_json, type=RunSpec)
    logs.drain()
    steps: list[StepRecord] = []
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
        if isinstance(item, StepRecord):
            steps.append(item)
            if item.sim_s > until_s and not stopping[0]:
                stopping[0] = True
                session.stop()
        elif isinstance(item, EngineAborted):
            abort.append(item)

    session.subscribe(sink)
    session.run()
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


def rewindow(result: SimResult, warmup_s: float) -> SimResult:
    return msgspec.structs.replace(result, windows=sim_windows(result.trace, warmup_s))


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
