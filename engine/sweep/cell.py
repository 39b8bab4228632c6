"""Run one cell: one headless Session, exactly what `observatory run` does with the same spec.

`run_session` is the one function that touches the engine; it builds the Session, subscribes a
Recorder (when the cell is kept), the SummaryBuilder and a latency tracker, and runs to the end.
When `observatory run` moves onto engine/host.py's EngineHost, this function moves with it.

`run_cell` wraps it for a worker: it never raises (any failure other than the engine's own abort
becomes a `failed` outcome with a one-line message), it times the engine start, and it returns
the cell's recording as bytes, so a worker on another machine needs no shared filesystem.
The first cell in a worker process pays for importing vLLM; later cells reuse the import, and
`import_s` says which was which.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from typing import Sequence

import msgspec

from engine.analysis.summary import Summary, SummaryBuilder, V1Summary
from engine.errors import ObservatoryError
from engine.spec import RunSpec
from engine.stream.records import STEP_TYPES, Arrivals, Header, Record

_imported = False


class Latency(msgspec.Struct, kw_only=True):
    """Throughput and TTFT in simulated time, defined as `observatory compare` defines them."""

    throughput_tok_s: float | None  # generated tokens per simulated second
    ttft_mean_s: float | None  # simulated seconds from arrival to first token
    ttft_p99_s: float | None  # nearest-rank 99th percentile


class CellOutcome(msgspec.Struct, kw_only=True):
    """What a worker sends back for one cell."""

    status: str  # "ok" (finished, hit --max-steps, or vLLM aborted) or "failed"
    message: str | None = None  # the failure, one line
    summary: Summary | None = None
    v1_summary: V1Summary | None = None  # a V1 engine's cell (its own summary: no swap space)
    latency: Latency | None = None
    engine_start_s: float | None = None  # building the LLMEngine (Session.prepare)
    import_s: float = 0.0  # importing vLLM: non-zero only for a worker's first cell
    cell_s: float = 0.0  # the whole cell inside the worker, wall clock
    cpu_s: float = 0.0  # CPU time the worker process used for it (cell_s >> cpu_s: starved)
    recording: bytes | None = None  # the zstd JSONL recording, when kept
    attempts: int = 1  # >1 when the driver retried after losing a worker
    node: str | None = None  # the Ray node that ran the cell (first 12 hex digits of its id)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: a value that actually occurred (as `compare` reports it)."""
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


class LatencyTracker:
    """Session sink: arrival times from Arrivals, first tokens from StepRecords."""

    def __init__(self) -> None:
        self.arrival_s: dict[str, float] = {}
        self.ttfts: list[float] = []
        self.generated = 0
        self.sim_s = 0.0

    def add(self, item: Header | Record) -> None:
        if type(item) in STEP_TYPES:  # either engine kind's steps
            self.generated += item.generated_tokens
            self.sim_s = item.sim_s
            for rid in item.first_tokens:
                if rid in self.arrival_s:
                    self.ttfts.append(item.sim_s - self.arrival_s[rid])
        elif isinstance(item, Arrivals):
            self.arrival_s.update(zip(item.request_ids, item.arrival_s))

    def result(self) -> Latency:
        ttfts = sorted(self.ttfts)
        return Latency(
            throughput_tok_s=round(self.generated / self.sim_s, 1) if self.sim_s > 0 else None,
            ttft_mean_s=round(sum(ttfts) / len(ttfts), 4) if ttfts else None,
            ttft_p99_s=round(percentile(ttfts, 99), 4) if ttfts else None,
        )


def run_session(spec: RunSpec, record_path: str | None
                ) -> tuple[Summary | V1Summary, Latency, float]:
    """One headless run, as `observatory run` does it: (summary, latency, engine start seconds).

    Raises an ObservatoryError for settings vLLM rejects; the engine's own abort is part of the
    summary.
    """
    from engine import logs
    from engine.session import Session
    from engine.stream.recorder import Recorder

    logs.drain()  # a reused worker: lines a previous cell left behind are not this cell's
    session = Session(spec)
    started = time.perf_counter()
    session.prepare()
    engine_start_s = time.perf_counter() - started
    recorder = None
    if record_path is not None:
        recorder = Recorder(record_path, session.header, background_flush=False,
                            fold=SummaryBuilder)
        session.subscribe(recorder.sink)
    builder = SummaryBuilder()
    latency = LatencyTracker()
    session.subscribe(builder.add)
    session.subscribe(latency.add)
    try:
        session.run()
    finally:
        if recorder is not None:
            recorder.close()
    if recorder is not None and recorder.error is not None:
        raise OSError(f"recording failed: {recorder.error}")
    return builder.result(), latency.result(), engine_start_s


def _import_engine() -> float:
    """Import vLLM (through the session module) once per process; seconds it took."""
    global _imported
    if _imported:
        return 0.0
    started = time.perf_counter()
    import engine.session  # noqa: F401  (pulls in vllm, torch, transformers)

    _imported = True
    return time.perf_counter() - started


def one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def run_cell(spec_json: bytes, record: bool) -> bytes:
    """A worker's task: the spec in, a msgspec-encoded CellOutcome out. Never raises."""
    started, cpu_started = time.perf_counter(), time.process_time()
    outcome = CellOutcome(status="failed")
    path = None
    try:
        outcome.import_s = round(_import_engine(), 3)
        spec = RunSpec.from_dict(msgspec.json.decode(spec_json))
        if record:
            handle, path = tempfile.mkstemp(prefix="observatory-cell-", suffix=".jsonl.zst")
            os.close(handle)
        summary, latency, engine_start_s = run_session(spec, path)
        outcome.status, outcome.latency = "ok", latency
        if isinstance(summary, V1Summary):
            outcome.v1_summary = summary
        else:
            outcome.summary = summary
        outcome.engine_start_s = round(engine_start_s, 3)
        if path is not None:
            with open(path, "rb") as file:
                outcome.recording = file.read()
    except ObservatoryError as exc:
        outcome.message = str(exc).strip().splitlines()[0]
    except Exception as exc:  # a bug or anything else: this cell fails, the sweep goes on
        outcome.message = one_line(exc)
    finally:
        if path is not None:
            try:
                os.unlink(path)
            except OSError:
                pass
    outcome.cell_s = round(time.perf_counter() - started, 3)
    outcome.cpu_s = round(time.process_time() - cpu_started, 3)
    return msgspec.msgpack.encode(outcome)


def decode_outcome(data: bytes) -> CellOutcome:
    return msgspec.msgpack.decode(data, type=CellOutcome)
