"""The hunt's driver: hand out workloads, take results in workload order, de-duplicate hits,
shrink the first of each, and write its bundle.

Results are taken in workload order (a result that comes early waits for the ones before it),
so the same seed gives the same findings from the same workloads, whichever worker ran which
and in whatever order they finished; a time budget only decides how many workloads there are
(the report says which). A hit is new when no earlier one had the same detector, policy and
scheduler state (engine.hunt.detectors.Hit.state): the first is shrunk and bundled, the later
ones are counted against it. Shrinks go out before new workloads, and new workloads stop at
SHRINK_SHARE of the budget so that the hits found have time to shrink.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from engine.hunt.case import Case
from engine.hunt.detectors import Hit
from engine.hunt.generate import ENGINE_BATCH
from engine.hunt.pool import Result, Task
from engine.hunt.runner import Outcome

SHRINK_SHARE = 0.75  # new workloads stop at this share of the time budget


@dataclass
class Finding:
    """One distinct hit: the first workload that showed it, shrunk and bundled."""

    hit: Hit
    policy: str
    index: int
    requests: int  # in the workload that hit
    case: Case
    outcome: Outcome
    found_s: float = 0.0  # seconds into the hunt when its workload's result was taken
    repeats: int = 0  # later workloads with the same key
    minimal: Case | None = None
    minimal_outcome: Outcome | None = None
    tries: int = 0
    bundle: Path | None = None
    reproduced: bool = False  # the bundle's own recorded run fired the same detector


@dataclass
class HuntReport:
    seed: int
    policy: str | None
    vllm: str = "?"
    workloads: int = 0  # run (in order: workloads 0 .. workloads-1)
    refused: int = 0
    ends: Counter = field(default_factory=Counter)
    hits: int = 0
    findings: list[Finding] = field(default_factory=list)
    elapsed_s: float = 0.0
    build_s: float = 0.0  # summed over workloads
    run_s: float = 0.0
    steps: int = 0
    errors: list[str] = field(default_factory=list)


Note = Callable[[str], None]


def run_hunt(pool: Any, *, seed: int, workloads: int, budget_s: float, policy: str | None,
             out: Path, shrink_tries: int, bundle: Callable[..., tuple[Path, Outcome]],
             advance: Callable[[int, int], None] = lambda done, hits: None,
             note: Note = lambda text: None) -> HuntReport:
    """Hunt until `workloads` have run or `budget_s` is spent; bundles go under `out`."""
    report = HuntReport(seed=seed, policy=policy)
    start = time.monotonic()
    submitted = committed = 0
    arrived: dict[int, Result] = {}
    shrinks: list[Task] = []
    seen: dict[tuple[str, str, str], Finding] = {}
    waiting_shrink: dict[int, Finding] = {}  # finding number -> finding
    try:
        while True:
            elapsed = time.monotonic() - start
            while shrinks and pool.in_flight < pool.capacity:
                pool.submit(shrinks.pop(0))
            while (pool.in_flight < pool.capacity and submitted < workloads
                   and elapsed < budget_s * SHRINK_SHARE):
                count = min(ENGINE_BATCH - submitted % ENGINE_BATCH, workloads - submitted)
                pool.submit(Task(kind="hunt", seed=seed, index=submitted, count=count,
                                 policy=policy))
                submitted += count
            if not pool.in_flight:
                break
            for result in pool.results():
                if result.vllm != "?":
                    report.vllm = result.vllm
                if result.error is not None:
                    report.errors.append(f"{result.kind} {result.index}: {result.error}")
                if result.kind == "hunt":
                    arrived[result.index] = result
                    continue
                finding = waiting_shrink.pop(result.index)
                if result.case is not None and result.outcome is not None:
                    finding.minimal, finding.minimal_outcome = result.case, result.outcome
                    finding.tries = result.tries
                else:  # the shrink failed: bundle the workload as it hit
                    finding.minimal, finding.minimal_outcome = finding.case, finding.outcome
                try:
                    path, again = bundle(out, finding.minimal, finding.hit, report.vllm,
                                         finding.requests, finding.tries)
                except Exception as exc:  # noqa: BLE001  the hunt goes on; the report says
                    report.errors.append(f"bundle of finding {result.index}: "
                                         f"{type(exc).__name__}: {exc}"[:300])
                    continue
                finding.bundle = path
                finding.reproduced = again.fired(finding.hit.detector) is not None
                note(f"hunt: {finding.hit.detector} under {finding.policy} (workload "
                     f"{finding.index}) shrunk to {len(finding.minimal.rows)} requests: "
                     f"{path}")
            while committed in arrived:
                result = arrived.pop(committed)
                committed += 1
                _take(result, report, seen, shrinks, waiting_shrink, shrink_tries, seed,
                      time.monotonic() - start)
                advance(report.workloads, len(report.findings))
    finally:
        pool.close()
    report.elapsed_s = time.monotonic() - start
    return report


def _take(result: Result, report: HuntReport, seen: dict, shrinks: list[Task],
          waiting: dict[int, Finding], tries: int, seed: int, elapsed: float) -> None:
    report.workloads += 1
    outcome, case = result.outcome, result.case
    if outcome is None or case is None:
        return
    report.ends[outcome.end] += 1
    if outcome.end == "refused":
        report.refused += 1
        return
    report.build_s += outcome.build_s
    report.run_s += outcome.run_s
    report.steps += outcome.steps
    for hit in outcome.hits:
        report.hits += 1
        key = hit.key(case.policy)
        if key in seen:
            seen[key].repeats += 1
            continue
        finding = Finding(hit=hit, policy=case.policy, index=case.index,
                          requests=len(case.rows), case=case, outcome=outcome,
                          found_s=elapsed)
        seen[key] = finding
        report.findings.append(finding)
        number = len(report.findings) - 1
        waiting[number] = finding
        shrinks.append(Task(kind="shrink", seed=seed, index=number, case=case,
                            outcome=outcome, detector=hit.detector, tries=tries))
