"""The end-of-run summary, folded from the record stream.

`observatory run` prints `summarize(what it emitted)` and `observatory summary FILE` prints
`summarize(what the file holds)`: one function over the same records, so the two are identical
by construction, and a recording cut short still summarizes what it has.

Peaks include the aborting moment (EngineAborted carries the scheduler's state when vLLM gave
up), since that is the fullest the swap space ever got.

A V1 run (Header.engine "v1", V1StepRecord steps) summarizes as a V1Summary: V1 has no swap
space, and its thrash is recompute, so it counts preemptions, the most any one request suffered,
the tokens computed again and the recompute tax (recomputed over all computed tokens). It also
says the longest admission stall (engine.analysis.stall's watchdog: steps, since which step,
waiting, KV free and what the head waiting request waited for at its last step; 0 steps when
there was none) and what is left: requests
that arrived and never finished, and of those the ones never scheduled at all. A run that ends
with requests left is not `completed`: an attached engine's stream that says so (its program
exited with requests still waiting, recorded before the observer said `unfinished`) summarizes
as `unfinished`. A run the observatory drove says `completed` only when vLLM itself had no
unfinished request left, which a request aborted on purpose (never finished, so counted in
`unfinished_requests`) does not contradict.
"""

from __future__ import annotations

from typing import Any, Iterable

import msgspec

from engine.analysis.seats import underfilled
from engine.analysis.stall import StallWatch, seat_limit
from engine.conventions import percent
from engine.kinds import V0, V1, EngineKind, newest_of
from engine.safe_text import safe
from engine.traces import stats as trace_stats
from engine.traces.stats import TraceStats
from engine.stream.records import (Arrivals, EngineAborted, Header, LogEvent, LogLine, LogWindow,
                                   PolicyChanged, Record, RunFinished, StepRecord, V1StepRecord)


class Summary(msgspec.Struct, kw_only=True):
    steps: int  # steps that completed: a count (engine.conventions), the aborting one not in it
    finished_requests: int  # requests whose every sequence finished (refused ones not counted)
    aborted: bool
    abort_reason: str | None  # vLLM's message
    abort_step: int | None  # the step vLLM raised in: an index, equal to `steps` from step 0
    peak_gpu_kv_pct: float  # the most GPU KV blocks used at any step's end, the aborting one too
    peak_cpu_kv_pct: float  # the same for the CPU (swap) blocks
    peak_swapped: int  # the most groups in the swapped queue at any step's end, or at the abort
    swap_outs: int  # groups swapped out, over the steps that completed
    swap_ins: int
    recompute_preemptions: int  # groups preempted by recomputation
    prefill_blocked_steps: int  # steps in which the policy withheld new prefills
    policy_changes: int
    prompt_tokens: int  # prompt tokens computed (vLLM's num_prompt_tokens_iter, summed)
    generated_tokens: int
    sim_seconds: float  # simulated seconds at the last step's end
    wall_seconds: float  # wall-clock seconds the run took
    end_reason: str | None  # RunFinished.reason; None when the recording was cut before the end
    time_axis: str = "sim"  # the recording's time axis (engine.stream.timeaxis): "sim" or "gpu"
    exec_seconds: float = 0.0  # measured seconds in the model executor, summed over steps
    # The committed demand (StepRecord.committed_blocks): its peak against GPU + CPU blocks,
    # and the first step at which it (with a swap-out's slack) outgrew them; None when the
    # recording predates it (or, for the step, when it never did).
    peak_committed_blocks: int | None = None
    capacity_blocks: int | None = None
    overcommitted_at_step: int | None = None
    trace: TraceStats | None = None  # a --trace run: what its trace's rows added up to


class V1Summary(msgspec.Struct, kw_only=True):
    engine: str  # "v1"
    vllm_version: str
    steps: int  # steps that completed: a count (engine.conventions)
    finished_requests: int
    aborted: bool
    abort_reason: str | None
    abort_step: int | None  # the step vLLM raised in: an index
    preemptions: int  # recompute preemptions (V1 has no other kind)
    preempted_requests: int  # distinct requests preempted at least once
    max_preemptions_per_request: int
    lost_tokens: int  # computed tokens the preemptions threw away
    recomputed_tokens: int  # tokens computed again after a preemption
    computed_tokens: int  # every token scheduled (prefill, recompute and decode)
    recompute_tax: float  # recomputed_tokens / computed_tokens
    # prompt tokens admitted requests found already computed, at every admission (a preempted
    # request again when it is resumed: engine.conventions): vLLM's num_cached_tokens, i.e.
    # its GPU prefix cache plus what a KV connector (the CPU tier) loaded. vLLM's own
    # prefix_cache_hits counts only the first; cpu_tier_hit_tokens counts the second.
    cached_tokens_per_admission: int
    peak_gpu_kv_pct: float
    peak_running: int
    peak_waiting: int
    admission_withheld_steps: int  # steps in which the policy held back an admission
    policy_changes: int
    prompt_tokens: int  # the prompts' own tokens, every request that arrived
    # prompt tokens the engine computed: chunks, and recompute after preemptions; not what
    # came from the cache (cached_tokens_per_admission), nor prompts never scheduled
    prompt_tokens_computed: int
    generated_tokens: int
    sim_seconds: float
    wall_seconds: float
    end_reason: str | None  # RunFinished.reason; "unfinished" for "completed" with requests left
    unfinished_requests: int = 0  # arrived and never finished
    never_started_requests: int = 0  # of those, never scheduled
    # the longest admission stall (engine.analysis.stall): 0 steps and None when there was none
    longest_stall_steps: int = 0
    longest_stall_since: int | None = None  # its first step
    longest_stall_waiting: int | None = None  # requests waiting at its last step
    # the least GPU KV free at any of its steps' ends, in % of all blocks (engine.conventions)
    longest_stall_kv_free_pct: float | None = None
    # what the head waiting request waited for at its last step, as vLLM's scan said
    # (engine.analysis.reasons); None when there was no stall or the recording has no reasons
    longest_stall_reason: str | None = None
    # steps whose seats vLLM counted full while it scheduled fewer (vLLM #45257 under async
    # scheduling: seats held by requests whose last token is in flight;
    # engine.analysis.seats), and the longest run of them; 0 in a run without
    underfilled_steps: int = 0
    longest_underfilled_steps: int = 0
    time_axis: str = "sim"
    exec_seconds: float = 0.0
    # vLLM's CPU KV tier (its offloading connector); all 0 without one
    cpu_tier_chunks: int = 0  # the tier's capacity
    peak_cpu_tier_chunks: int = 0  # the most chunks resident at a step's end
    cpu_tier_loads: int = 0  # load jobs (CPU -> GPU)
    cpu_tier_load_bytes: int = 0
    cpu_tier_stores: int = 0  # store jobs (GPU -> CPU)
    cpu_tier_store_bytes: int = 0
    cpu_tier_evictions: int = 0  # chunks evicted
    cpu_tier_hit_tokens: int = 0  # tokens served from the tier (part of the cached tokens)
    cpu_tier_wait_seconds: float = 0.0  # simulated seconds steps waited for transfers
    trace: TraceStats | None = None  # a --trace run: what its trace's rows added up to
    # prompt tokens each request found already computed when first admitted (each request
    # once: at most the prompts' tokens); None for a recording made before it was recorded
    cached_tokens_per_request: int | None = None
    # cached_tokens_per_request of prompt_tokens, in percent (0-100: a request finds at most
    # its prompt less its last token); None when the recording predates the per-request
    # count. A trace run compares the count with trace.prefix_tokens_allowed instead (what its
    # hash_ids and --trace-n allow when requests are admitted in arrival order: vLLM admitting
    # one early, as a CPU tier's async loads make it, can find a little more, so that is a
    # count beside a count, not a percentage)
    cached_prompt_pct: float | None = None

    # the V0 names a comparison table reads (V1 has no swap space: its CPU is the tier)
    @property
    def peak_cpu_kv_pct(self) -> float:
        return (round(100.0 * self.peak_cpu_tier_chunks / self.cpu_tier_chunks, 2)
                if self.cpu_tier_chunks else 0.0)

    @property
    def peak_swapped(self) -> int:
        return 0

    @property
    def prefill_blocked_steps(self) -> int:
        return self.admission_withheld_steps


class SummaryBuilder:
    """Feed items in stream order with `add`; read `result()` at any time."""

    def __init__(self) -> None:
        self.steps = 0
        self.finished_requests = 0
        self.abort: EngineAborted | None = None
        self.peak_gpu = 0.0
        self.peak_cpu = 0.0
        self.peak_swapped = 0
        self.swap_outs = 0
        self.swap_ins = 0
        self.recomputes = 0
        self.blocked = 0
        self.policy_changes = 0
        self.prompt_tokens = 0
        self.generated_tokens = 0
        self.sim_s = 0.0
        self.wall_s = 0.0
        self.end: RunFinished | None = None
        self.time_axis = "sim"
        self.exec_s = 0.0
        self.log_abort: LogEvent | None = None
        self.peak_committed: int | None = None
        self.capacity: int | None = None
        self.overcommitted_at: int | None = None
        self.header: Header | None = None
        self.kind: EngineKind = V0  # V1 from its header, or its first V1 step
        self.preemptions = 0
        self.preempted: set[str] = set()
        self.max_preemptions = 0
        self.lost = 0
        self.recomputed = 0
        self.computed = 0
        self.prefix_hits = 0
        self.first_hits: int | None = 0  # None once a step predates new_prefix_hit_tokens
        self.prompt_tokens_arrived = 0
        self.peak_running = 0
        self.peak_waiting = 0
        self.tier = dict.fromkeys(_TIER_SUMS, 0)
        self.tier_chunks = 0
        self.peak_tier_chunks = 0
        self.tier_wait_s = 0.0
        self.trace: TraceStats | None = None
        self.arrived: set[str] = set()
        self.finished_ids: set[str] = set()
        self.started: set[str] = set()
        self.stalls: StallWatch | None = None
        self.seats = 0  # the header's max_num_seqs (0: not said): under-filled steps need it
        self.underfilled = self.underfill_run = self.longest_underfill = 0

    def _add_v1(self, item: V1StepRecord) -> None:
        self.kind = V1
        self.steps += 1
        self.finished_requests += len(item.finished)
        self.finished_ids.update(item.finished)
        if item.new:
            self.started.update(rid for rid, _ in item.new)
        if self.stalls is None:
            self.stalls = StallWatch()
        self.stalls.add(item)
        if self.seats and underfilled(item, self.seats):
            self.underfilled += 1
            self.underfill_run += 1
            self.longest_underfill = max(self.longest_underfill, self.underfill_run)
        else:
            self.underfill_run = 0
        self.peak_gpu = max(self.peak_gpu, item.gpu_pct)
        self.peak_running = max(self.peak_running, item.running)
        self.peak_waiting = max(self.peak_waiting, item.waiting)
        for rid, lost, count in item.preempted:
            self.preemptions += 1
            self.preempted.add(rid)
            self.lost += lost
            if count > self.max_preemptions:
                self.max_preemptions = count
        self.recomputed += item.recomputed_tokens
        self.computed += item.batched_tokens
        self.prefix_hits += item.prefix_hit_tokens
        if item.new_prefix_hit_tokens is None:
            self.first_hits = None
        elif self.first_hits is not None:
            self.first_hits += item.new_prefix_hit_tokens
        self.blocked += item.withheld
        self.prompt_tokens += item.prompt_tokens
        self.generated_tokens += item.generated_tokens
        self.sim_s, self.wall_s = item.sim_s, item.wall_s
        self.exec_s += item.exec_s
        if item.cpu_chunks_total:
            self._add_tier(item)

    def _add_tier(self, item: V1StepRecord) -> None:
        tier = self.tier
        for field in _TIER_SUMS:
            tier[field] += getattr(item, field)
        self.tier_chunks = item.cpu_chunks_total
        self.peak_tier_chunks = max(self.peak_tier_chunks, item.cpu_chunks)
        self.tier_wait_s += item.cpu_wait_s

    def add(self, item: Header | Record) -> None:
        if type(item) is V1StepRecord:
            self._add_v1(item)
        elif isinstance(item, StepRecord):
            self.steps += 1
            self.finished_requests += len(item.finished) - len(item.ignored)
            self.peak_gpu = max(self.peak_gpu, item.gpu_pct)
            self.peak_cpu = max(self.peak_cpu, item.cpu_pct)
            self.peak_swapped = max(self.peak_swapped, item.swapped)
            self.swap_outs += len(item.swapped_out)
            self.swap_ins += len(item.swapped_in)
            self.recomputes += len(item.recomputed)
            self.blocked += item.withheld
            self.prompt_tokens += item.prompt_tokens
            self.generated_tokens += item.generated_tokens
            self.sim_s, self.wall_s = item.sim_s, item.wall_s
            self.exec_s += item.exec_s
            if item.committed_blocks is not None:
                self.peak_committed = max(self.peak_committed or 0, item.committed_blocks)
                self.capacity = item.capacity_blocks
                if self.overcommitted_at is None and item.overcommitted:
                    self.overcommitted_at = item.step
        elif isinstance(item, PolicyChanged):
            self.policy_changes += 1
        elif isinstance(item, EngineAborted):
            self.abort = item
            self.peak_gpu = max(self.peak_gpu, item.gpu_pct)
            self.peak_cpu = max(self.peak_cpu, item.cpu_pct)
            self.peak_swapped = max(self.peak_swapped, item.swapped)
            self.wall_s = item.wall_s
        elif isinstance(item, RunFinished):
            self.end = item
            self.sim_s, self.wall_s = item.sim_s, item.wall_s
        elif isinstance(item, Header):
            self.time_axis = item.time_axis
            self.header = item
            self.kind = newest_of((self.kind.name, item.engine))
            if self.kind.watches_stalls and self.stalls is None:
                self.stalls = StallWatch(seat_limit(item))
            self.seats = seat_limit(item) or 0
        elif isinstance(item, (LogWindow, LogEvent)):
            self._add_log(item)
        elif isinstance(item, LogLine):
            if item.logger == trace_stats.LOGGER:
                self.trace = trace_stats.parse(item.message) or self.trace
        elif isinstance(item, Arrivals):
            if self.kind is V1:  # what arrived: V1's summary counts it, V0's has no such count
                self.arrived.update(item.request_ids)
                self.prompt_tokens_arrived += sum(item.prompt_tokens)

    def _add_log(self, item: LogWindow | LogEvent) -> None:
        """A reference recording (an imported vLLM log): peaks from its stats lines, finished
        requests from tqdm, the abort from the traceback. It has no steps, so step counts stay 0
        and token totals stay 0 rather than being integrated from 5-s averages."""
        if isinstance(item, LogWindow):
            self.peak_gpu = max(self.peak_gpu, item.gpu_pct or 0.0)
            self.peak_cpu = max(self.peak_cpu, item.cpu_pct or 0.0)
            self.peak_swapped = max(self.peak_swapped, item.swapped or 0)
        elif item.event == "progress" and item.finished is not None:
            self.finished_requests = item.finished
        elif item.event == "abort":
            self.log_abort = item
        if item.t_s is not None:
            self.sim_s = max(self.sim_s, item.t_s)

    def result(self) -> Summary | V1Summary:
        """The summary in the run's kind's vocabulary (RESULTS)."""
        return RESULTS[self.kind.name](self)

    def _shared(self) -> dict[str, Any]:
        """The fields both kinds' summaries hold, counted alike."""
        return {
            "steps": self.steps,
            "finished_requests": self.finished_requests,
            "abort_step": self.abort.step if self.abort else None,
            "peak_gpu_kv_pct": round(self.peak_gpu, 2),
            "policy_changes": self.policy_changes,
            "generated_tokens": self.generated_tokens,
            "sim_seconds": round(self.sim_s, 4),
            "wall_seconds": round(self.wall_s, 3),
            "time_axis": self.time_axis,
            "exec_seconds": round(self.exec_s, 6),
            "trace": self.trace,
        }

    def _v0_result(self) -> Summary:
        abort = self.abort
        log_abort = self.log_abort
        return Summary(
            **self._shared(),
            aborted=abort is not None or log_abort is not None,
            abort_reason=abort.message if abort else log_abort.text if log_abort else None,
            peak_cpu_kv_pct=round(self.peak_cpu, 2),
            peak_swapped=self.peak_swapped,
            swap_outs=self.swap_outs,
            swap_ins=self.swap_ins,
            recompute_preemptions=self.recomputes,
            prefill_blocked_steps=self.blocked,
            prompt_tokens=self.prompt_tokens,
            end_reason=self.end.reason if self.end else None,
            peak_committed_blocks=self.peak_committed,
            capacity_blocks=self.capacity,
            overcommitted_at_step=self.overcommitted_at,
        )

    def _v1_result(self) -> V1Summary:
        abort = self.abort
        unfinished = self.arrived - self.finished_ids
        end = self.end.reason if self.end else None
        attached = self.header is not None and "attached" in self.header.engine_config
        if end == "completed" and unfinished and attached:
            end = "unfinished"
        longest = self.stalls.longest if self.stalls is not None else None
        return V1Summary(
            engine="v1",
            vllm_version=self.header.vllm_version if self.header is not None else "",
            **self._shared(),
            aborted=abort is not None,
            abort_reason=abort.message if abort else None,
            preemptions=self.preemptions,
            preempted_requests=len(self.preempted),
            max_preemptions_per_request=self.max_preemptions,
            lost_tokens=self.lost,
            recomputed_tokens=self.recomputed,
            computed_tokens=self.computed,
            recompute_tax=round(self.recomputed / self.computed, 4) if self.computed else 0.0,
            cached_tokens_per_admission=self.prefix_hits,
            cached_tokens_per_request=self.first_hits if self.steps else None,
            peak_running=self.peak_running,
            peak_waiting=self.peak_waiting,
            admission_withheld_steps=self.blocked,
            prompt_tokens=self.prompt_tokens_arrived,
            prompt_tokens_computed=self.prompt_tokens,
            end_reason=end,
            unfinished_requests=len(unfinished),
            never_started_requests=len(unfinished - self.started),
            longest_stall_steps=longest.steps if longest is not None else 0,
            longest_stall_since=longest.since if longest is not None else None,
            longest_stall_waiting=longest.waiting if longest is not None else None,
            longest_stall_kv_free_pct=round(longest.free_pct, 1) if longest is not None
            else None,
            longest_stall_reason=(longest.reason or None) if longest is not None else None,
            underfilled_steps=self.underfilled,
            longest_underfilled_steps=self.longest_underfill,
            cpu_tier_chunks=self.tier_chunks,
            peak_cpu_tier_chunks=self.peak_tier_chunks,
            **{"cpu_tier_" + field.removeprefix("cpu_"): value
               for field, value in self.tier.items()},
            cpu_tier_wait_seconds=round(self.tier_wait_s, 6),
            cached_prompt_pct=self._cached_prompt_pct(),
        )


    def _cached_prompt_pct(self) -> float | None:
        """The per-request cached tokens of the prompts that arrived, in %; None when either is
        not in the recording whole (made before the per-request count; switched on mid-run,
        with requests admitted that arrived before it)."""
        hits, prompts = self.first_hits, self.prompt_tokens_arrived
        if hits is None or not self.steps or not prompts or hits > prompts:
            return None
        return round(percent(hits, prompts), 2)


_TIER_SUMS = ("cpu_loads", "cpu_load_bytes", "cpu_stores", "cpu_store_bytes", "cpu_evictions",
              "cpu_hit_tokens")
"""V1StepRecord fields a V1 summary adds up as cpu_tier_<name without cpu_>."""


def _later_fields() -> frozenset[str]:
    fields = [f for kind in (Summary, V1Summary) for f in msgspec.structs.fields(kind)]
    return frozenset({f.name for f in fields if f.default is not msgspec.NODEFAULT
                      or f.default_factory is not msgspec.NODEFAULT} | {"prompt_tokens"})


LATER_SUMMARY_FIELDS = _later_fields()
"""Summary fields an index sealed before them may lack: every field with a default (each was
added after the first recordings shipped; `recordings/v1-thrash-*` predate the stall fields),
and V1's `prompt_tokens` in an index read through `current_names`. An older index is compared
on everything else; a required field missing is still a damaged index."""


RETIRED_MEANINGS = ("longest_stall_kv_free_pct", "trace_prefix_hit_pct")
"""V1 summary fields sealed before `cached_tokens_per_request` came that no summary says any
more in their sense: the stall's KV free (at its last step then, the least over it now) and
the trace's hit percentage (per admission over what the trace allows, which passed 100: gone,
the cached tokens per request stand beside the allowance as counts). The view of such a
summary leaves them out; the records say today's."""


RESULTS = {"v0": SummaryBuilder._v0_result, "v1": SummaryBuilder._v1_result}
SUMMARY_TYPES: dict[str, type[Summary | V1Summary]] = {"v0": Summary, "v1": V1Summary}
"""Each kind's summary: how a builder makes it, and its type (an index's summary is read as)."""


def current_names(summary: dict[str, Any]) -> dict[str, Any]:
    """An index's summary under today's names and meanings. A V1 summary sealed before each
    token count had its own name (no `prompt_tokens_computed`) kept the computed prompt tokens
    in `prompt_tokens` and the cached ones in `prefix_hit_tokens`, and had no count of the
    prompts' own tokens: that one is absent here. One sealed before the cached tokens were
    counted per request too called the per-admission count `cached_tokens`, and its
    RETIRED_MEANINGS are left out."""
    if summary.get("engine") != "v1" or "cached_tokens_per_request" in summary:
        return summary
    view = dict(summary)
    if "prompt_tokens_computed" not in view:
        view["prompt_tokens_computed"] = view.pop("prompt_tokens", None)
        view["cached_tokens"] = view.pop("prefix_hit_tokens", None)
    view["cached_tokens_per_admission"] = view.pop("cached_tokens", None)
    for name in RETIRED_MEANINGS:
        view.pop(name, None)
    return view


def summarize(items: Iterable[Header | Record]) -> Summary | V1Summary:
    builder = SummaryBuilder()
    for item in items:
        builder.add(item)
    return builder.result()


def summary_json(summary: Summary | V1Summary) -> str:
    return msgspec.json.format(msgspec.json.encode(summary), indent=2).decode()


def format_summary(summary: Summary | V1Summary, columns: int | None = None) -> str:
    """Human-readable, one `name  value` per line, in the Struct's field order, fitted to
    `columns` (default: the terminal's, 80 without one: engine.widths): a long value (vLLM's
    abort message) goes on under its own column, never under the names."""
    import textwrap

    from engine.widths import terminal_width

    width = max(len(name) for name in summary.__struct_fields__)
    room = max(20, (columns or terminal_width()) - width - 2)
    lines = []
    for name in summary.__struct_fields__:
        value = getattr(summary, name)
        if isinstance(value, TraceStats):
            value = ", ".join(f"{k} {v}" for k, v in msgspec.structs.asdict(value).items()
                              if v is not None)
        text = "-" if value is None else safe(value)
        parts = textwrap.wrap(text, room, break_long_words=False, break_on_hyphens=False) \
            if len(text) > room else [text]
        lines.append(f"{name:<{width}}  {parts[0] if parts else ''}".rstrip())
        lines += [" " * (width + 2) + part for part in parts[1:]]
    return "\n".join(lines)
