"""The same sim run on another cost model's clock, without running it again.

When every request arrives at t=0 (the seed, and any `fit` of an offline `generate()` log) the
scheduler's decisions do not depend on time at all: the cost model only says how long each step
took. So a run made once can be re-timed for any cost model by summing `step_seconds` over its
recorded steps. That is what makes the fit of the cost model cheap (thousands of candidates in
a second) and leaves the expensive sims to the output-length model, which does change decisions.
With `--arrival-rate` arrivals follow the simulated clock and a re-timed run is an approximation;
`fit` says so and re-runs its result for the figures it prints.

A V1 run is re-timed the same way, with the terms its adapter charges (engine.adapters.v1.
step_record: prompt tokens, recompute included, decoding requests, the running requests'
computed tokens); a step that waited for CPU-tier transfers keeps that wait as it was (it
depends on the clock too, so a re-timed run with a CPU tier is an approximation as well).
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from engine.analysis.logs.simrun import SimResult, steady_running
from engine.costmodel import CostModel


def retime(result: SimResult, cost: CostModel) -> SimResult:
    """`result` with every step's time recomputed by `cost` (windows left for `rewindow`). The
    aborting step has no record; it is charged the cost model's fixed `base_s`."""
    return RETIMES[result.engine](result, cost)


def _retime_v0(result: SimResult, cost: CostModel) -> SimResult:
    t = 0.0
    trace = []
    for point, (decode_seqs, context_tokens, swap_blocks, _) in zip(result.trace, result.costs):
        t += cost.step_seconds(point[1], decode_seqs, context_tokens, swap_blocks)
        trace.append((t, *point[1:]))
    running_p50, running_max = steady_running(trace)
    return msgspec.structs.replace(
        result, trace=trace, windows=[], sim_s=t,
        abort_s=t + cost.base_s if result.aborted else None,
        running_p50=running_p50, running_max=running_max)


def _retime_v1(result: SimResult, cost: CostModel) -> SimResult:
    t = 0.0
    trace = []
    for point, (prompt, decode_reqs, kv_tokens, wait_s, _) in zip(result.v1_trace,
                                                                    result.v1_costs):
        t += cost.step_seconds(prompt, decode_reqs, kv_tokens) + wait_s
        trace.append((t, *point[1:]))
    running_p50, running_max = steady_running(trace)
    return msgspec.structs.replace(result, v1_trace=trace, windows=[], sim_s=t,
                                   running_p50=running_p50, running_max=running_max)


RETIMES = {"v0": _retime_v0, "v1": _retime_v1}
"""Each kind's re-timing, of its own trace with the terms its adapter charges."""


def finished_by(result: SimResult, sim_s: float) -> int:
    """Requests finished by simulated second `sim_s` (by the end, if the run ended before)."""
    done = 0
    for t, finished in FINISHED[result.engine](result):
        if t > sim_s:
            break
        done = finished
    return done


def _finished_v0(result: SimResult) -> Iterator[tuple[float, int]]:
    return ((point[0], cost[3]) for point, cost in zip(result.trace, result.costs))


def _finished_v1(result: SimResult) -> Iterator[tuple[float, int]]:
    return ((point[0], cost[4]) for point, cost in zip(result.v1_trace, result.v1_costs))


FINISHED = {"v0": _finished_v0, "v1": _finished_v1}
"""Each kind's steps as (sim time, requests finished so far), from its own trace."""
