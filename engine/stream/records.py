"""The typed records of one run: the single stream that feeds the TUI, recordings, replay,
summaries, exports and verification.

Every record is a msgspec Struct tagged by a ``kind`` field, so one JSON line decodes to the
right type without guessing and `jq 'select(.kind=="step")'` works without the observatory.
Field names are short because a recording holds one step record per engine step; they are
documented here once.

Schema changes: add fields with defaults (old readers ignore unknown fields, new readers fill
defaults). Anything that changes the meaning of an existing field bumps SCHEMA_VERSION, and
readers refuse a schema newer than theirs.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

SCHEMA_VERSION = 1


class StepRecord(msgspec.Struct, tag="step", tag_field="kind", kw_only=True, gc=False):
    """What one `LLMEngine.step()` decided and left behind.

    Queue sizes and block counts are read at the end of the step, the moment vLLM reads its own
    `Stats`, so they agree with vLLM's metrics for the same step.
    """

    step: int
    wall_s: float  # wall-clock seconds since the session started, at the end of this step
    sim_s: float  # simulated seconds at the end of this step (see engine.costmodel)
    sim_step_s: float  # simulated duration of this step
    policy: str  # policy in force for this step ("off", "strict", "watermark:0.5")

    running: int  # sequence groups in vLLM's running queue
    swapped: int  # sequence groups in vLLM's swapped queue
    waiting: int  # sequence groups in vLLM's waiting queue
    running_seqs: int  # sequences (not groups) with status RUNNING

    gpu_used: int  # GPU KV-cache blocks in use
    gpu_total: int
    cpu_used: int  # CPU (swap) KV-cache blocks in use
    cpu_total: int

    batched_tokens: int  # SchedulerOutputs.num_batched_tokens
    token_budget: int  # max_num_batched_tokens

    prefills: list[tuple[str, int]]  # (request id, tokens in this chunk), in schedule order
    decode_groups: int
    decode_seqs: int

    swapped_out: list[str]  # request ids preempted by swapping this step
    swapped_in: list[str]
    recomputed: list[str]  # request ids preempted by recomputation
    ignored: list[str]  # request ids vLLM refused (too long / infeasible)
    finished: list[str]
    first_tokens: list[str]  # request ids that produced their first output token this step

    prompt_tokens: int  # prompt tokens computed this step (vLLM's num_prompt_tokens_iter)
    generated_tokens: int  # tokens generated this step (vLLM's num_generation_tokens_iter)

    withheld: bool  # the policy withheld new prefills this step
    held_back: int  # waiting groups held back by that (the waiting queue at that moment)

    @property
    def gpu_pct(self) -> float:
        return 100.0 * self.gpu_used / self.gpu_total if self.gpu_total else 0.0

    @property
    def cpu_pct(self) -> float:
        return 100.0 * self.cpu_used / self.cpu_total if self.cpu_total else 0.0


class Arrivals(msgspec.Struct, tag="arrivals", tag_field="kind", kw_only=True, gc=False):
    """Requests handed to the engine just before `step` runs."""

    step: int
    sim_s: float  # simulated time at which they were added
    source: str  # "workload" or "burst"
    request_ids: list[str]
    prompt_tokens: list[int]
    arrival_s: list[float]  # each request's simulated arrival time (<= sim_s)


class PolicyChanged(msgspec.Struct, tag="policy", tag_field="kind", kw_only=True, gc=False):
    """The fix policy changed; `step` is the first step the new policy governs."""

    step: int
    old: str
    new: str
    source: str  # "cli", "toggle-at", "tui", "api", "verify"


class EngineAborted(msgspec.Struct, tag="abort", tag_field="kind", kw_only=True, gc=False):
    """vLLM raised out of `step()`; this record stands for the aborting step.

    The counts are the scheduler's state when it raised, so the screen and the recording show
    how full the swap space was at the moment vLLM gave up.
    """

    step: int
    message: str
    error: str  # exception type name, e.g. "RuntimeError"
    sim_s: float
    wall_s: float
    running: int
    swapped: int
    waiting: int
    gpu_used: int
    gpu_total: int
    cpu_used: int
    cpu_total: int

    @property
    def cpu_pct(self) -> float:
        return 100.0 * self.cpu_used / self.cpu_total if self.cpu_total else 0.0

    @property
    def gpu_pct(self) -> float:
        return 100.0 * self.gpu_used / self.gpu_total if self.gpu_total else 0.0


class LogLine(msgspec.Struct, tag="log", tag_field="kind", kw_only=True, gc=False):
    """A line vLLM logged, captured so it never reaches the terminal directly."""

    step: int
    level: str
    logger: str
    message: str
    repeats: int = 1  # identical consecutive lines are folded into one


class RunFinished(msgspec.Struct, tag="end", tag_field="kind", kw_only=True, gc=False):
    """The stream is over. `steps` counts completed steps (the aborting step not included)."""

    steps: int
    reason: str  # "completed", "max_steps", "stopped", "aborted"
    sim_s: float
    wall_s: float


class ObserverError(msgspec.Struct, tag="observer_error", tag_field="kind", kw_only=True,
                    gc=False):
    """The observatory's own code failed (a scheduler hook, building a step record, a sink):
    a bug in the observatory, not in vLLM. Kept apart from EngineAborted so nobody mistakes it
    for vLLM giving up. The run stops there; RunFinished(reason="observer_error") follows."""

    step: int
    where: str  # "hook _schedule_prefills", "build_step_record", "sink Recorder.sink"...
    error: str  # exception type name
    message: str  # its first line


Record = Union[StepRecord, Arrivals, PolicyChanged, EngineAborted, LogLine, RunFinished,
               ObserverError]
"""Anything that can follow the header in a stream or recording."""

RECORD_TYPES: tuple[type, ...] = (StepRecord, Arrivals, PolicyChanged, EngineAborted, LogLine,
                                  RunFinished, ObserverError)


class Header(msgspec.Struct, tag="header", tag_field="kind", kw_only=True):
    """The first line of a recording: enough to re-run it (`spec`) and to trust it."""

    schema: int
    observatory_version: str
    vllm_version: str
    backend: str
    model: str
    spec: dict[str, Any]  # engine.spec.RunSpec as a dict; RunSpec.from_dict rebuilds it
    engine_config: dict[str, Any]  # what vLLM was built with, for humans and jq
    started_at: str  # ISO 8601, UTC
    host: str
    starts_at_step: int = 0  # >0 when recording was switched on mid-run (the TUI's `r` key)


_encoder = msgspec.json.Encoder()
_record_decoder = msgspec.json.Decoder(Record)


def encode(record: Record | Header) -> bytes:
    """One JSON line without the newline."""
    return _encoder.encode(record)


def decode_record(line: bytes | str) -> Record:
    """Decode a non-header line; raises msgspec.DecodeError / ValidationError on bad input."""
    return _record_decoder.decode(line)


# ---- reference recordings: a real vLLM V0 log, imported (engine.analysis.logs) ----------------
# Kept in its own block (and folded into Record below) so it merges apart from the step schema.
# A reference recording is a Header (backend "log"), LogWindow and LogEvent records, then
# RunFinished. Nothing in it is invented: a field the log does not give is None.

class LogWindow(msgspec.Struct, tag="log_window", tag_field="kind", kw_only=True, gc=False):
    """One V0 stats line (`Avg prompt throughput: ...`): vLLM's view of the last ~5 s.

    `t_s` is seconds since the run's first step (see engine.analysis.logs.timeline for how it is
    estimated); throughputs are vLLM's averages over the window that ends at `t_s`. A record cut
    mid-field is `partial` and its cut fields are None, never a guess.
    """

    t_s: float | None
    clock: str | None  # the timestamp as the log wrote it
    line: int  # 1-based physical line where the record starts
    prompt_tps: float | None
    gen_tps: float | None
    running: int | None
    swapped: int | None
    pending: int | None
    gpu_pct: float | None
    cpu_pct: float | None
    partial: bool = False
    missing: list[str] = []  # the fields that were cut or absent


class LogEvent(msgspec.Struct, tag="log_event", tag_field="kind", kw_only=True, gc=False):
    """Something else the log said: "preemption", "progress" (tqdm), "config", "blocks",
    "abort"."""

    t_s: float | None
    line: int
    event: str
    text: str  # the record, cleaned, cut to 300 characters
    mode: str | None = None  # preemption: "SWAP" or "RECOMPUTE"
    group: str | None = None  # preemption: the sequence group id
    cumulative: int | None = None  # preemption: total_num_cumulative_preemption
    finished: int | None = None  # progress: requests finished
    total: int | None = None  # progress: requests in all
    values: dict[str, Any] = {}  # config / blocks: the fields read by key


Record = Union[Record, LogWindow, LogEvent]  # type: ignore[misc]
RECORD_TYPES = RECORD_TYPES + (LogWindow, LogEvent)
_record_decoder = msgspec.json.Decoder(Record)
