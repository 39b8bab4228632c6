"""Where a hunt's work runs: Ray workers (a local runtime, one per core, or a cluster) or this
process (`--serial`), behind one small interface.

The work is two kinds of task, each a msgspec message in and out: `hunt` (draw one engine's
batch of workloads of the seed and run them) and `shrink` (make a hit smaller). A worker keeps vLLM imported and
keeps the engines it built (engine.hunt.warm): only its first task pays the import, and a
batch of workloads (or a shrink's runs) that share engine settings share one engine, reset
between them. Ray reuses worker processes between tasks, as the sweep's cells do
(engine.sweep.ray_pool, whose runtime this borrows). Each task draws its own workload from (seed, index), so
it does not matter which worker runs it.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterator

import msgspec

from engine.hunt.case import Case
from engine.hunt.runner import Outcome

POLL_S = 0.5


class Task(msgspec.Struct, kw_only=True):
    kind: str  # "hunt" or "shrink"
    seed: int
    index: int  # hunt: the first workload; shrink: the finding's number
    count: int = 1  # hunt: workloads index .. index+count-1 (one engine's batch)
    policy: str | None = None
    case: Case | None = None  # shrink: the case that hit
    outcome: Outcome | None = None  # shrink: what it hit
    detector: str = ""
    tries: int = 0


class Result(msgspec.Struct, kw_only=True):
    kind: str
    index: int
    vllm: str
    case: Case | None = None  # hunt: the workload; shrink: the smallest found
    outcome: Outcome | None = None
    tries: int = 0
    detector: str = ""
    error: str | None = None  # the task itself failed (the observatory's bug), one line


_process: dict[str, Any] = {}  # this worker's Caps and WarmEngines, made on first use


def perform(task_bytes: bytes) -> bytes:
    """One task, in whichever process runs it: its results (one per workload), encoded. Never
    raises: a failure of the task itself (not of vLLM, which the runner records as a hit)
    comes back as `error`."""
    task = msgspec.json.decode(task_bytes, type=Task)
    results: list[Result] = []
    try:
        _perform(task, results)
    except Exception as exc:  # noqa: BLE001  the hunt goes on; the report lists it
        from engine.errors import first_line

        done = {r.index for r in results}
        results += [Result(kind=task.kind, index=i, vllm="?",
                           error=f"{type(exc).__name__}: {first_line(exc)}")
                    for i in range(task.index, task.index + task.count) if i not in done]
    return msgspec.json.encode(results)


def _perform(task: Task, results: list[Result]) -> None:
    from engine.hunt.caps import installed
    from engine.hunt.generate import generate
    from engine.hunt.runner import run_case
    from engine.hunt.shrink import shrink
    from engine.hunt.warm import WarmEngines

    if not _process:
        _process.update(caps=installed(), engines=WarmEngines())
    caps, engines = _process["caps"], _process["engines"]
    if task.kind == "hunt":
        for index in range(task.index, task.index + task.count):
            case = generate(task.seed, index, caps, task.policy)
            results.append(Result(kind="hunt", index=index, vllm=caps.vllm, case=case,
                                  outcome=run_case(case, engines=engines)))
        return
    assert task.case is not None and task.outcome is not None
    shrunk = shrink(task.case, task.outcome, task.detector, task.tries,
                    run=lambda case: run_case(case, engines=engines))
    results.append(Result(kind="shrink", index=task.index, vllm=caps.vllm, case=shrunk.case,
                          outcome=shrunk.outcome, tries=shrunk.tries, detector=task.detector))


class SerialPool:
    """Tasks run here, one at a time, when asked for their results."""

    capacity = 1

    def __init__(self) -> None:
        self._queue: deque[Task] = deque()

    def submit(self, task: Task) -> None:
        self._queue.append(task)

    @property
    def in_flight(self) -> int:
        return len(self._queue)

    def results(self) -> Iterator[Result]:
        if self._queue:
            task = self._queue.popleft()
            yield from msgspec.json.decode(perform(msgspec.json.encode(task)),
                                           type=list[Result])

    def close(self) -> None:
        self._queue.clear()


class RayPool:
    """Tasks as Ray tasks (`num_cpus=1`) on the connected runtime; at most `capacity` at
    once, the rest wait here."""

    def __init__(self, capacity: int) -> None:
        import ray

        self.capacity = capacity
        self._remote = ray.remote(num_cpus=1, max_retries=1)(perform)
        self._refs: dict[Any, Task] = {}

    def submit(self, task: Task) -> None:
        self._refs[self._remote.remote(msgspec.json.encode(task))] = task

    @property
    def in_flight(self) -> int:
        return len(self._refs)

    def results(self) -> Iterator[Result]:
        import ray

        if not self._refs:
            return
        ready, _ = ray.wait(list(self._refs), num_returns=1, timeout=POLL_S)
        for ref in ready:
            self._refs.pop(ref)
            yield from msgspec.json.decode(ray.get(ref), type=list[Result])

    def close(self) -> None:
        import ray

        for ref in self._refs:
            ray.cancel(ref, force=True)
        self._refs.clear()
