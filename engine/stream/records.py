"""The typed records of one run: the single stream that feeds the TUI, recordings, replay,
summaries, exports and verification.

Every record is a msgspec Struct tagged by a ``kind`` field, so one JSON line decodes to the
right type without guessing and `jq 'select(.kind=="step")'` works without the observatory.
Field names are short because a recording holds one step record per engine step; they are
documented here once.

Schema changes: add fields with defaults (old readers ignore unknown fields, new readers fill
defaults). Anything that changes the meaning of an existing field bumps SCHEMA_VERSION, and
readers refuse a schema newer than theirs. Schema 2 added the recorder's `Check` lines (see
engine.stream.reader.checked); schema 1 files still load, marked as not fully checkable.

Numeric fields carry bounds (`Count`, `Seconds`) that msgspec enforces while decoding, so a
damaged or hand-edited file cannot feed a negative count, a token count of 2**63 or a block
count of 10**30 into a summary. JSON has no NaN or infinity and msgspec refuses numbers that
overflow a float, so every float read from a file is finite.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

import msgspec

SCHEMA_VERSION = 2

MAX_COUNT = 1 << 48
"""The largest count or step number a record may carry: far above any real run (a block
count, a token total), far below where float sums or percentages lose meaning."""
MAX_SECONDS = 1e9  # ~31 years of wall or simulated time

Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
Seconds = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_SECONDS)]


MEASURED_RESOLUTION_S = 1e-6
"""What a step's measured times can honestly resolve: reading the clock and the timing wrapper
around `execute_model` cost about 0.4 us (bench/bench_exec_timing.py), so digits below a
microsecond are noise. Stored beyond it they cost ~8 bytes a step of incompressible digits, a
sixth of a compressed recording. The header's `time_resolution_s` says what a file used."""
_MEASURED_DIGITS = 6  # decimal places of MEASURED_RESOLUTION_S


_PER_SECOND = 10 ** _MEASURED_DIGITS


def measured(seconds: float) -> float:
    """`seconds` rounded to MEASURED_RESOLUTION_S (the shortest JSON form of that value).

    Whole microseconds over an exact division (correctly rounded, so the result prints with at
    most six decimals): `round(seconds, 6)`'s value but for a tie within one ulp of the
    product, at a third of its cost; it runs twice in every step of an observed engine."""
    return round(seconds * _PER_SECOND) / _PER_SECOND


class StepRecord(msgspec.Struct, tag="step", tag_field="kind", kw_only=True, gc=False):
    """What one `LLMEngine.step()` decided and left behind.

    Queue sizes and block counts are read at the end of the step, the moment vLLM reads its own
    `Stats`, so they agree with vLLM's metrics for the same step.
    """

    step: Count
    wall_s: Seconds  # wall-clock seconds since the session started, at the end of this step
    sim_s: Seconds  # simulated seconds at the end of this step (see engine.costmodel)
    sim_step_s: Seconds  # simulated duration of this step
    policy: str  # policy in force for this step ("off", "strict", "watermark:0.5")

    running: Count  # sequence groups in vLLM's running queue
    swapped: Count  # sequence groups in vLLM's swapped queue
    waiting: Count  # sequence groups in vLLM's waiting queue
    running_seqs: Count  # sequences (not groups) with status RUNNING

    gpu_used: Count  # GPU KV-cache blocks in use (<= gpu_total: checked by the reader)
    gpu_total: Count
    cpu_used: Count  # CPU (swap) KV-cache blocks in use (<= cpu_total)
    cpu_total: Count

    batched_tokens: Count  # SchedulerOutputs.num_batched_tokens
    token_budget: Count  # max_num_batched_tokens

    prefills: list[tuple[str, Count]]  # (request id, tokens in this chunk), in schedule order
    decode_groups: Count
    decode_seqs: Count

    swapped_out: list[str]  # request ids preempted by swapping this step
    swapped_in: list[str]
    recomputed: list[str]  # request ids preempted by recomputation
    ignored: list[str]  # request ids vLLM refused (too long / infeasible)
    finished: list[str]
    first_tokens: list[str]  # request ids that produced their first output token this step

    prompt_tokens: Count  # prompt tokens computed this step (vLLM's num_prompt_tokens_iter)
    generated_tokens: Count  # tokens generated this step (vLLM's num_generation_tokens_iter)

    withheld: bool  # the policy withheld new prefills this step
    held_back: Count  # waiting groups held back by that (the waiting queue at that moment)

    # Measured seconds the model executor took for this step (0.0 when nothing was scheduled
    # and in recordings made before it existed): gpu, CUDA-synchronised on both sides of
    # `execute_model`; sim, the real time of the do-nothing executor (engine.adapters.exec_timing).
    exec_s: Seconds = 0.0

    # vLLM 0.6.4+ only (None before): an n>1 request runs as n single-sequence groups, and the
    # id lists above name each request once; these count the sequences swapped out / in.
    swapped_out_seqs: int | None = None
    swapped_in_seqs: int | None = None

    # KV blocks copied GPU->CPU plus CPU->GPU this step (0 in recordings made before it was
    # recorded): what the cost model's swap term charges, and what `fit` retimes a run with.
    swap_blocks: Count = 0

    # Committed demand at the end of the step: the worst-case KV blocks of every admitted group
    # (each unfinished sequence grown to prompt + max_tokens, counted as the release's block
    # manager counts them; engine.policy.Demand). Against gpu_total + cpu_total it says whether
    # the swap space can still run out. None in recordings made before it was recorded.
    committed_blocks: Count | None = None
    # Blocks beyond that a swap-out may need (the largest admitted group plus its sequences;
    # 0 when every victim can be recomputed instead): `reserve` keeps committed + slack within
    # capacity. None in older recordings.
    committed_slack: Count | None = None

    # What a re-run needs (engine.analysis.rerun): each sequence that finished this step, as
    # (its request id, its output tokens); a sample that ended at its first token is listed at
    # the step that sampled it. None in recordings made before it was recorded.
    seq_finished: list[tuple[str, Count]] | None = None

    @property
    def gpu_pct(self) -> float:
        return 100.0 * self.gpu_used / self.gpu_total if self.gpu_total else 0.0

    @property
    def capacity_blocks(self) -> int:
        """GPU plus CPU KV blocks: what the committed demand is measured against."""
        return self.gpu_total + self.cpu_total

    @property
    def overcommitted(self) -> bool:
        """The demand admitted (with a swap-out's slack) no longer fits GPU + CPU: a swap-out
        can overflow the CPU unless groups end early. False when not recorded, and when the
        slack is 0: every victim can then be recomputed (reserve from vLLM 0.6.4, where each
        group is one sequence), so no swap-out has to fit in the CPU."""
        if self.committed_blocks is None or self.committed_slack == 0:
            return False
        return self.committed_blocks + (self.committed_slack or 0) > self.capacity_blocks

    @property
    def cpu_pct(self) -> float:
        return 100.0 * self.cpu_used / self.cpu_total if self.cpu_total else 0.0


class V1StepRecord(msgspec.Struct, tag="step_v1", tag_field="kind", kw_only=True, gc=False):
    """What one step of vLLM's V1 engine (`EngineCore.step`, 0.11+) decided and left behind.

    V1 has no swap space and no sequence groups: a request is scheduled a number of tokens
    (a prefill chunk, a decode token, or a recompute of what a preemption threw away), and a
    preempted request loses every computed token and waits again. Counts are read at the end of
    the step, after vLLM's own `update_from_output`.

    The properties below name the V0 vocabulary (swapped, cpu_*, swapped_out...) for the
    screens and indexes that speak it: V1 has no swap space, so they read as empty, except
    `cpu_used` / `cpu_total` / `cpu_pct`, which read the CPU KV tier's chunks (vLLM's offloading
    connector, when the run has one), so the CPU KV plot shows the tier.
    """

    step: Count
    wall_s: Seconds  # wall-clock seconds since the session started, at the end of this step
    sim_s: Seconds  # simulated seconds at the end of this step (see engine.costmodel)
    sim_step_s: Seconds  # simulated duration of this step
    policy: str  # policy in force for this step ("off", "whole-context", ...)

    running: Count  # requests in vLLM's running list
    waiting: Count  # requests in vLLM's waiting queue (preempted ones included)
    finished_total: Count  # requests finished since the run started

    gpu_used: Count  # KV-cache blocks in use (vLLM's null block not counted)
    gpu_total: Count  # usable KV-cache blocks
    kv_tokens: Count  # tokens whose KV the running requests hold (their computed tokens)

    batched_tokens: Count  # tokens scheduled this step (SchedulerOutput.total_num_scheduled_tokens)
    token_budget: Count  # max_num_batched_tokens

    # (request id, tokens scheduled this step), in schedule order:
    new: list[tuple[str, Count]]  # admitted for the first time
    resumed: list[tuple[str, Count]]  # admitted again after a preemption
    scheduled: list[tuple[str, Count]]  # already running
    # (request id, computed tokens it lost, its preemptions so far): recompute preemptions
    preempted: list[tuple[str, Count, Count]]

    # tokens admitted requests found already computed this step, at every admission (a
    # resumed request again: engine.conventions): the prefix cache, and with a CPU tier also
    # what they loaded from it (counted again in cpu_hit_tokens when the load was planned,
    # usually a step earlier)
    prefix_hit_tokens: Count
    recomputed_tokens: Count  # scheduled tokens a request had computed before and lost
    prompt_tokens: Count  # tokens scheduled before a request's first sample (chunks, recompute)
    generated_tokens: Count  # tokens sampled this step (one per request that sampled)
    decode_reqs: Count  # requests scheduled one token past their context (decoding)
    first_tokens: list[str]  # request ids that sampled their first output token this step
    finished: list[str]

    withheld: bool  # the policy held back an admission this step
    held_back: Count  # waiting requests at that moment

    # running totals since the run started, so any one step says the run's recompute tax
    computed_total: Count  # tokens scheduled (batched_tokens summed)
    recomputed_total: Count  # recomputed_tokens summed
    preemptions_total: Count  # preemptions so far

    exec_s: Seconds = 0.0  # measured seconds of the sim executor's execute_model

    # The CPU KV tier: vLLM's OffloadingConnector and its CPUOffloadingManager
    # (engine.adapters.v1.tier). All 0 without a tier, and in recordings made before it.
    cpu_chunks: Count = 0  # CPU chunks holding KV (stored or being stored) at the step's end
    cpu_chunks_total: Count = 0  # the tier's capacity in chunks (0: no tier)
    cpu_loads: Count = 0  # load jobs (CPU -> GPU) the step issued
    cpu_load_bytes: Count = 0
    cpu_stores: Count = 0  # store jobs (GPU -> CPU) the step issued
    cpu_store_bytes: Count = 0
    cpu_evictions: Count = 0  # chunks vLLM's CPU manager evicted this step
    cpu_hit_tokens: Count = 0  # tokens requests admitted this step will load from the tier
    cpu_in_flight: Count = 0  # loads and stores vLLM still waits for at the step's end
    cpu_wait_s: Seconds = 0.0  # sim: seconds the step waited for transfers (in sim_step_s)

    # of prefix_hit_tokens, the part of the requests admitted for the first time (`new`): each
    # request's cached tokens counted once, at most its prompt. None in recordings made
    # before it was recorded.
    new_prefix_hit_tokens: Count | None = None

    # Why the waiting wait (engine.adapters.v1.hooks; None in recordings made before it):
    # vLLM's own `num_requests_waiting_by_reason` at the step's end ({"capacity": n,
    # "deferred": m}, as its make_stats() counts them; {} on a release without it), and the
    # first reason vLLM's scan turned down the request it takes first next step (engine.
    # analysis.reasons names them), with what that reason measured: seats taken / the seat
    # limit, tokens scheduled / the token budget, blocks needed / blocks free.
    waiting_by_reason: dict[str, Count] | None = None  # vLLM's capacity / deferred counts
    head_reason: str | None = None  # "" when no request waits (or the step did not schedule)
    head_need: Count | None = None  # seats taken, tokens scheduled, blocks needed
    head_limit: Count | None = None  # the seat limit, the token budget, blocks free

    # What a re-run needs (engine.analysis.rerun): the output tokens of each request in
    # `finished`, in that order. None in recordings made before it was recorded.
    finished_lens: list[Count] | None = None

    # ---- the V0 vocabulary, for screens that speak it (V1 has no swap space) ----
    @property
    def swapped(self) -> int:
        return 0

    @property
    def cpu_used(self) -> int:
        """The CPU tier's resident chunks: what the CPU KV plot shows for V1."""
        return self.cpu_chunks

    @property
    def cpu_total(self) -> int:
        return self.cpu_chunks_total

    @property
    def running_seqs(self) -> int:
        return self.running

    @property
    def prefills(self) -> list[tuple[str, int]]:
        return [*self.new, *self.resumed,
                *((rid, n) for rid, n in self.scheduled if n > 1)]

    @property
    def decode_groups(self) -> int:
        return self.decode_reqs

    @property
    def decode_seqs(self) -> int:
        return self.decode_reqs

    @property
    def swapped_out(self) -> list[str]:
        return []

    @property
    def swapped_in(self) -> list[str]:
        return []

    @property
    def recomputed(self) -> list[str]:
        return [entry[0] for entry in self.preempted]

    @property
    def ignored(self) -> list[str]:
        return []

    @property
    def swapped_out_seqs(self) -> None:
        return None

    @property
    def swapped_in_seqs(self) -> None:
        return None

    @property
    def swap_blocks(self) -> int:
        return 0

    @property
    def committed_blocks(self) -> None:
        return None  # the worst-case demand of `reserve` is a V0 notion (sequence groups)

    @property
    def committed_slack(self) -> None:
        return None

    @property
    def capacity_blocks(self) -> int:
        return self.gpu_total

    @property
    def overcommitted(self) -> bool:
        return False

    @property
    def gpu_pct(self) -> float:
        return 100.0 * self.gpu_used / self.gpu_total if self.gpu_total else 0.0

    @property
    def cpu_pct(self) -> float:
        return (100.0 * self.cpu_chunks / self.cpu_chunks_total if self.cpu_chunks_total
                else 0.0)

    @property
    def recompute_tax(self) -> float:
        """Tokens computed again over all tokens computed, so far."""
        return self.recomputed_total / self.computed_total if self.computed_total else 0.0

    @property
    def lost_tokens(self) -> int:
        """Computed tokens this step's preemptions threw away."""
        return sum(entry[1] for entry in self.preempted)


STEP_TYPES: tuple[type, ...] = (StepRecord, V1StepRecord)
"""The per-step records, one per engine kind (Header.engine): "v0" StepRecord, "v1"
V1StepRecord. Indexes, checks and summaries take either."""


class Arrivals(msgspec.Struct, tag="arrivals", tag_field="kind", kw_only=True, gc=False):
    """Requests handed to the engine just before `step` runs."""

    step: Count
    sim_s: Seconds  # simulated time at which they were added
    source: str  # "workload" or "burst"
    request_ids: list[str]
    prompt_tokens: list[Count]
    arrival_s: list[Seconds]  # each request's arrival on the run's time axis (stream.timeaxis):
    # simulated (<= sim_s) on the sim, measured seconds since the run started on a GPU

    # What a re-run needs (engine.analysis.rerun), one entry per request; None in recordings
    # made before they were recorded. `n`: its samples (vLLM's SamplingParams.n; a V1 request
    # is one sample: vLLM's frontend turns n=4 into four requests). `max_tokens`: its output
    # limit. `prefix`: its prompt's fingerprint (shared, own) in the recording's block numbers
    # (engine.fingerprint: the blocks it shares with earlier requests, then its own, the last
    # partial one included; no token is stored), blocks of the engine's block size.
    n: list[Count] | None = None
    max_tokens: list[Count] | None = None
    prefix: list[tuple[Count, Count]] | None = None


class PolicyChanged(msgspec.Struct, tag="policy", tag_field="kind", kw_only=True, gc=False):
    """The fix policy changed; `step` is the first step the new policy governs."""

    step: Count
    old: str
    new: str
    source: str  # "cli", "toggle-at", "tui", "api", "verify"


class EngineAborted(msgspec.Struct, tag="abort", tag_field="kind", kw_only=True, gc=False):
    """vLLM raised out of `step()`; this record stands for the aborting step.

    The counts are the scheduler's state when it raised, so the screen and the recording show
    how full the swap space was at the moment vLLM gave up.
    """

    step: Count
    message: str
    error: str  # exception type name, e.g. "RuntimeError"
    sim_s: Seconds
    wall_s: Seconds
    running: Count
    swapped: Count
    waiting: Count
    gpu_used: Count
    gpu_total: Count
    cpu_used: Count
    cpu_total: Count

    @property
    def cpu_pct(self) -> float:
        return 100.0 * self.cpu_used / self.cpu_total if self.cpu_total else 0.0

    @property
    def gpu_pct(self) -> float:
        return 100.0 * self.gpu_used / self.gpu_total if self.gpu_total else 0.0


class LogLine(msgspec.Struct, tag="log", tag_field="kind", kw_only=True, gc=False):
    """A line vLLM logged, captured so it never reaches the terminal directly."""

    step: Count
    level: str
    logger: str
    message: str
    repeats: Annotated[int, msgspec.Meta(ge=1, le=MAX_COUNT)] = 1  # identical consecutive lines are folded into one


class RunFinished(msgspec.Struct, tag="end", tag_field="kind", kw_only=True, gc=False):
    """The stream is over. `steps` counts completed steps (the aborting step not included)."""

    steps: Count
    reason: str  # "completed", "max_steps", "stopped", "aborted", "observer_error", "bad_trace",
    # "no_progress" (engine.analysis.progress: the ERROR line before it says what was stuck)
    sim_s: Seconds
    wall_s: Seconds


class ObserverError(msgspec.Struct, tag="observer_error", tag_field="kind", kw_only=True,
                    gc=False):
    """The observatory's own code failed (a scheduler hook, building a step record, a sink):
    a bug in the observatory, not in vLLM. Kept apart from EngineAborted so nobody mistakes it
    for vLLM giving up. The run stops there; RunFinished(reason="observer_error") follows."""

    step: Count
    where: str  # "hook _schedule_prefills", "build_step_record", "sink Recorder.sink"...
    error: str  # exception type name
    message: str  # its first line


# ---- reference recordings: a real vLLM V0 log, imported (engine.analysis.logs) ----------------
# A reference recording is a Header (backend "log"), LogWindow and LogEvent records, then
# RunFinished. Nothing in it is invented: a field the log does not give is None.

# A log line may come before the run's first step (negative t_s); rates and percentages are
# bounded only against nonsense, since vLLM prints what it computed.
LogSeconds = Annotated[float, msgspec.Meta(ge=-MAX_SECONDS, le=MAX_SECONDS)]
Rate = Annotated[float, msgspec.Meta(ge=0.0, le=1e15)]


class LogWindow(msgspec.Struct, tag="log_window", tag_field="kind", kw_only=True, gc=False):
    """One stats line (`Avg prompt throughput: ...`): vLLM's view of the last ~5 s (V0) or
    ~10 s (V1).

    `t_s` is seconds since the run's first step (see engine.analysis.logs.timeline for how it is
    estimated); throughputs are vLLM's averages over the window that ends at `t_s`. A record cut
    mid-field is `partial` and its cut fields are None, never a guess.
    """

    t_s: LogSeconds | None
    clock: str | None  # the timestamp as the log wrote it
    line: Count  # 1-based physical line where the record starts
    prompt_tps: Rate | None
    gen_tps: Rate | None
    running: Count | None
    swapped: Count | None
    pending: Count | None  # V0's `Pending:` (None in V1 logs: see `waiting`)
    gpu_pct: Rate | None
    cpu_pct: Rate | None
    partial: bool = False
    missing: list[str] = []  # the fields that were cut or absent
    # V1 logs only (None in V0 ones): `waiting` holds V1's `Waiting:`, `gpu_pct` the KV cache
    # usage of the device it names (`kv_device`), and swapped / cpu_pct / pending stay None.
    waiting: Count | None = None
    engine: Annotated[int, msgspec.Meta(ge=-1, le=MAX_COUNT)] | None = None  # `Engine NNN:` (data parallel: one series each); -1: aggregated
    kv_device: str | None = None
    prefix_hit_pct: Rate | None = None
    external_prefix_hit_pct: Rate | None = None
    mm_hit_pct: Rate | None = None
    preemptions: Count | None = None  # in the window; V1 logs it only when > 0
    deferred: Count | None = None

    def __post_init__(self) -> None:
        # recordings imported before V1 windows had `waiting` kept V1's `Waiting:` in
        # `pending`; a V1 window (it names its KV device) reads the same either way
        if self.pending is not None and self.waiting is None and self.kv_device is not None:
            self.waiting, self.pending = self.pending, None


class LogEvent(msgspec.Struct, tag="log_event", tag_field="kind", kw_only=True, gc=False):
    """Something else the log said: "preemption", "progress" (tqdm), "config", "blocks",
    "kv_size" (V1's KV cache in tokens), "abort"."""

    t_s: LogSeconds | None
    line: Count
    event: str
    text: str  # the record, cleaned, cut to 300 characters
    mode: str | None = None  # preemption: "SWAP" or "RECOMPUTE"
    group: str | None = None  # preemption: the sequence group id
    cumulative: Count | None = None  # preemption: total_num_cumulative_preemption
    finished: Count | None = None  # progress: requests finished
    total: Count | None = None  # progress: requests in all
    values: dict[str, Any] = {}  # config / blocks / kv_size: the fields read by key


Record = Union[StepRecord, V1StepRecord, Arrivals, PolicyChanged, EngineAborted, LogLine,
               RunFinished, ObserverError, LogWindow, LogEvent]
"""Anything that can follow the header in a stream or recording."""

RECORD_TYPES: tuple[type, ...] = (StepRecord, V1StepRecord, Arrivals, PolicyChanged,
                                  EngineAborted, LogLine, RunFinished, ObserverError, LogWindow,
                                  LogEvent)


class DeviceInfo(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The hardware and software a run's measured times come from (engine.adapters.device_info).
    Empty strings: unknown, or a recording made before this existed."""

    name: str = ""  # "NVIDIA A100-SXM4-40GB", or "cpu" for the sim backend
    torch: str = ""  # torch.__version__
    cuda: str = ""  # CUDA runtime torch was built with (torch.version.cuda)
    driver: str = ""  # NVIDIA driver version
    capability: str = ""  # compute capability, "8.0"
    memory_gib: float = 0.0  # device memory


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
    starts_at_step: Count = 0  # >0 when recording was switched on mid-run (the TUI's `r` key)
    # The one time axis every plot, table and export of this run uses (engine.stream.timeaxis):
    # "sim" (the cost model's simulated seconds) or "gpu" (measured seconds on the GPU host).
    time_axis: str = "sim"
    device: DeviceInfo = DeviceInfo()
    # Which vLLM engine made the records (ENGINE_KINDS): "v0" (LLMEngine, 0.5-0.10.2; every
    # recording made before this field existed) or "v1" (EngineCore, 0.11+). The framing, checks
    # and limits are shared; the decision payloads differ by kind.
    engine: str = "v0"
    # Step records' measured times (`wall_s`, `exec_s`) are rounded to multiples of this many
    # seconds (MEASURED_RESOLUTION_S). 0.0: stored at full float precision (recordings made
    # before this field existed). Simulated times are never rounded: `verify` compares them.
    time_resolution_s: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] = 0.0


ENGINE_KINDS = ("v0", "v1")


class Check(msgspec.Struct, tag="check", tag_field="kind", kw_only=True, omit_defaults=True,
            gc=False):
    """Not a record of the run: the recorder's seal on what it just flushed (schema >= 2).

    The recorder ends every flush with one, covering the lines since the previous one, so a
    reader can tell a flipped byte in a plain `.jsonl` (CRC), lost, repeated or reordered
    lines and zstd frames (`lines`, `seq`) and a file cut at a line or frame boundary (no
    `final` one) from a whole recording. See engine.stream.reader.checked for the rules.
    """

    seq: Count  # flushes before this one
    lines: Count  # lines it covers: all lines after the previous Check line
    crc: Annotated[int, msgspec.Meta(ge=0, le=0xFFFFFFFF)]  # CRC-32 of those lines' bytes
    final: bool = False  # the recorder closed the file here: nothing may follow


class Index(msgspec.Struct, tag="index", tag_field="kind", kw_only=True, gc=False):
    """Not a record of the run: the recorder's table of contents, written once at close as
    the last line before the final Check (which seals it like any other line), in a zstd
    frame of its own. A reader that wants only the end of a run (`summary`, a replay's first
    screen) reads this and one frame instead of the whole file (engine.stream.reader.indexed).

    `frames[k]` is (byte offset of zstd frame k, or of the k-th ~FRAME_BYTES chunk of a plain
    file; the first step record at or after it). Every frame starts right after a Check line,
    so each decodes on its own. `summary` is engine.analysis.summary's Summary (or V1Summary)
    of everything before the index, as a dict; None if the recorder did not see every record.
    """

    frames: list[tuple[Count, Count]]
    index_offset: Count  # where this index's own frame (or line) starts
    lines: Count  # lines before this one, the header included
    steps: Count  # step records in the file
    first_step: Count | None  # None: no step at all
    last_step: Count | None
    finished: bool  # the run's end record (RunFinished) is in the file
    summary: dict[str, Any] | None = None


class Tally(msgspec.Struct, tag="tally", tag_field="kind", kw_only=True, gc=False):
    """Not a record of the run: the recorder's summary of the records before it, written once
    at close as the last line of the last *data* frame (so the frame's own Check line and zstd
    checksum cover it together with the records it sums up), before the Index.

    Why a second copy of the index's summary: the index frame is small and stands alone, so
    a forged summary resealed there (its Check recomputed) would pass every checksum. A reader
    that answers from the index (`summary`, a replay's first screen) requires the index to
    equal this line (engine.stream.reader.vouch) and to agree with the records of the frame
    that holds it (engine.analysis.index_summary); forging the summary then means rewriting
    and resealing a data frame, not just the table of contents.
    """

    steps: Count  # step records before this line
    summary: dict[str, Any]


_encoder = msgspec.json.Encoder()


def encode(record: Record | Header) -> bytes:
    """One JSON line without the newline."""
    return _encoder.encode(record)


decode_record = msgspec.json.Decoder(Record).decode
"""The one decoder of the record union: a non-header line (bytes or str) to its Record; raises
msgspec.DecodeError / ValidationError on bad input. Every reader decodes with it (a bound
method: it runs once per line of every recording read)."""
