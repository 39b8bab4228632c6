"""Run one hunted workload on the installed release's real scheduler (the sim backend) with
every detector, and say what fired.

A run is a plain Session of the case's spec (what `observatory run --config ... --trace ...`
runs), with two bounds so that a workload never holds a worker for long: a step limit
(MAX_STEPS, past every small workload's end) and a tighter no-progress guard (GUARD_STEPS,
well past the livelock detector's LIVELOCK_STEPS). A spec vLLM or the observatory refuses (a
draw the release cannot build) is `refused`, never a hit: the hunt looks for the scheduler's
bugs, not for its config checks.

The engine is built in this process: a worker that keeps vLLM imported builds the next one in
about a second or less (bench/hunt_throughput.py measures it), where a new process pays the
import again first.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import msgspec

from engine.analysis.progress import ProgressGuard
from engine.errors import ObservatoryError
from engine.hunt.case import Case
from engine.hunt.detectors import Detectors, Hit
from engine.hunt.warm import WarmEngines
from engine.stream.producer import end_record
from engine.stream.records import RunFinished

MAX_STEPS = 4_000
GUARD_STEPS = 400
GUARD_SECONDS = 120.0
RECORDING_NAME = "recording.jsonl.zst"


class Outcome(msgspec.Struct, kw_only=True):
    """What one run of a case came to."""

    index: int
    end: str  # RunFinished's reason, or "refused"
    steps: int = 0
    hits: list[Hit] = []
    refused: str | None = None  # why the spec could not run, one line
    build_s: float = 0.0  # building the engine (or resetting a warm one)
    warm: bool = False  # a kept engine, reset, ran it (engine.hunt.warm)
    run_s: float = 0.0  # stepping it to the end

    def fired(self, detector: str) -> Hit | None:
        return next((h for h in self.hits if h.detector == detector), None)


def run_case(case: Case, directory: Path | None = None, record: bool = False,
             engines: WarmEngines | None = None) -> Outcome:
    """Run `case`; its trace (and, with `record`, its recording) go to `directory` (a
    temporary one when None). With `engines`, a kept engine of the same settings is reset and
    reused, and this one is kept if its workload completes."""
    if directory is None:
        with tempfile.TemporaryDirectory(prefix="observatory-hunt-") as tmp:
            return _run(case, Path(tmp), record, engines)
    return _run(case, directory, record, engines)


def _run(case: Case, directory: Path, record: bool, engines: WarmEngines | None) -> Outcome:
    from engine.adapters.kv_audit import audit
    from engine.session import Session

    trace = case.write_trace(directory)
    try:
        spec = case.spec(trace, max_steps=MAX_STEPS)
        start = time.perf_counter()
        warm = engines.take(spec) if engines is not None else None
        session = Session(spec, freeze_gc=False, driver=warm,
                          guard=ProgressGuard(steps=GUARD_STEPS, seconds=GUARD_SECONDS))
        session.prepare()
    except ObservatoryError as exc:
        return Outcome(index=case.index, end="refused", refused=_line(exc))
    built = time.perf_counter()
    detectors = Detectors()
    ends: list[RunFinished] = []
    session.subscribe(detectors.add)
    session.subscribe(lambda item: ends.append(item) if type(item) is RunFinished else None)
    recorder = None
    if record:
        from engine.analysis.summary import SummaryBuilder
        from engine.stream.recorder import Recorder

        recorder = Recorder(str(directory / RECORDING_NAME), fold=SummaryBuilder)
        session.subscribe(recorder.sink)
    try:
        session.run()
    finally:
        if recorder is not None:
            recorder.close()
    end = ends[-1] if ends else end_record("observer_error", 0, 0.0, 0.0)
    problems = audit(session.driver) if end.reason == "completed" else []
    if engines is not None and end.reason == "completed" and not problems:
        engines.give(spec, session.driver)
    hits = list(detectors.hits)
    where = raised_where(session.engine_error)
    if where:  # an exception's place in vLLM's code is part of what it is
        hits = [msgspec.structs.replace(h, what=f"{h.what} [raised in {where}]",
                                        state=f"{h.state} @ {where}")
                if h.detector == "exception" else h for h in hits]
    hits += [Hit(detector="kv_accounting", step=end.steps, what=problem,
                 state=problem.split(":")[0]) for problem in problems[:1]]
    return Outcome(index=case.index, end=end.reason, steps=end.steps, hits=hits,
                   build_s=built - start, run_s=time.perf_counter() - built,
                   warm=warm is not None)


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def raised_where(exc: BaseException | None) -> str:
    """Where in vLLM (or the observatory) `exc` was raised: the innermost frame's file, from
    its package down, and its function ("vllm/core/block_manager_v1.py:swap_out")."""
    import traceback

    if exc is None or exc.__traceback__ is None:
        return ""
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    path = frame.filename.replace("\\", "/")
    for root in ("/vllm/", "/engine/"):
        if root in path:
            path = root[1:] + path.rsplit(root, 1)[1]
            break
    return f"{path}:{frame.name}"
