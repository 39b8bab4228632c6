"""The hunt's detectors: what counts as a scheduler bug, read from a run's stream of records.

- `abort`: V0's swap-space abort (vLLM raises "Aborted due to the lack of CPU swap space");
  its state says whether new prefills were admitted while groups sat swapped out (#5578's
  mechanism) or not (a group that outgrew the swap space on its own).
- `exception`: anything else vLLM raised out of its step or refused at `add_request` (an
  AssertionError in its scheduler or KV manager is a bug found).
- `stall`: the admission watchdog's rule (engine.analysis.stall): no admission for its
  MIN_STEPS while requests wait and a seat and half the KV cache are free. Its state says
  whether the refused head waited alone or with a queue behind it (head-of-line blocking).
  A capacity wait is not a stall here: the head refused for more blocks than are free (vLLM's
  own count) while no waiting request's whole context fits in them. vLLM is right to wait
  then (a head that needs 52% of the cache waits with 50% free), so the detector waits too,
  and fires at the first step of the same stall where a waiting request would fit.
- `livelock`: LIVELOCK_STEPS steps in a row that schedule no token while requests wait, the
  budget is unused and no CPU-tier transfer is pending; or the no-progress guard ended the run.
- `thrash`: one request preempted THRASH_PREEMPTIONS times (#25538's shape).
- `starvation`: a request never admitted in STARVE_STEPS steps while STARVE_FINISHED requests
  that arrived after it finished (the steps rule out a request that waited a step or two for
  its prefix to load from the CPU tier while one-token requests streamed past).
- `kv_accounting`: at the end of a workload that completed, a block still in use, a request
  still holding blocks, or the prefix cache's or the CPU tier's counts disagreeing (read by
  engine.adapters.kv_audit from vLLM's own objects; added by the runner).

Each hit carries `state`, the scheduler's state at the hit in a few words (the head waiting
request's reason, the error's type and words with numbers taken out), which with the detector
and the policy is what de-duplicates hits. Pure: records in, hits out; no vLLM here.
"""

from __future__ import annotations

import re

import msgspec

from engine.analysis import progress
from engine.analysis.stall import StallWatch, seat_limit
from engine.kinds import kind_of
from engine.stream.records import (STEP_TYPES, Arrivals, EngineAborted, Header, LogLine,
                                   RunFinished, V1StepRecord)
from engine.traces.recording import block_size_of

DETECTORS = ("abort", "exception", "stall", "livelock", "thrash", "starvation",
             "kv_accounting")
THRASH_PREEMPTIONS = 8
STARVE_FINISHED = 16
STARVE_STEPS = 100
LIVELOCK_STEPS = 50
V0_SWAP_ABORT = "Aborted due to the lack of CPU swap space"


class Hit(msgspec.Struct, frozen=True, kw_only=True):
    detector: str  # one of DETECTORS
    step: int  # where it fired
    what: str  # one sentence: what happened
    state: str  # the scheduler's state at the hit (the de-dup key, with detector and policy)
    request: str | None = None  # the request it is about, if one

    def key(self, policy: str) -> tuple[str, str, str]:
        return self.detector, policy, self.state


def _words(text: str) -> str:
    """`text` with its numbers and ids taken out: the same failure at another size."""
    return re.sub(r"\d+(\.\d+)?", "N", text)[:120]


def _head(s) -> str:  # noqa: ANN001
    return getattr(s, "head_reason", None) or ("swapped" if s.swapped else "waiting")


def _queue(waiting: int) -> str:
    """A stall's queue, in its key: one request refused alone (its prompt does not fit beside
    the running ones: the full-ISL rule's cost) or a head refused with others waiting behind it
    (head-of-line blocking, #31731's shape). A shrink keeps the one it started from, so a
    head-of-line stall is not shrunk down to its lone head."""
    return " alone" if waiting <= 1 else " with a queue behind"


class Detectors:
    """Fed every item of a run's stream (a Session sink); `hits` holds what fired, each
    detector at most once per run."""

    def __init__(self, *, thrash: int = THRASH_PREEMPTIONS, starve: int = STARVE_FINISHED,
                 livelock: int = LIVELOCK_STEPS, starve_steps: int = STARVE_STEPS) -> None:
        self.thrash_k, self.starve_m, self.livelock_n = thrash, starve, livelock
        self.starve_steps = starve_steps
        self.hits: list[Hit] = []
        self._fired: set[str] = set()
        self._stalls: StallWatch | None = None
        self._block_size = 16  # the run's, from its Header
        # V1: each waiting request's context in tokens (its prompt, or what a preemption took
        # from it), to tell a capacity wait from a stall
        self._waiting_tokens: dict[str, int] = {}
        self._prompt_tokens: dict[str, int] = {}
        self._order: dict[str, int] = {}  # request -> arrival rank
        self._unadmitted: dict[str, int] = {}  # request -> later arrivals finished meanwhile
        self._arrived: dict[str, int] = {}  # request -> the step it arrived at
        self._passed: set[str] = set()  # unadmitted requests STARVE_FINISHED have passed
        self._times_preempted: dict[str, int] = {}
        self._idle = 0
        self._admitted_while_swapped = False  # V0: #5578's admission with groups swapped out
        self._guard_line = ""
        self.last_step = None

    def _fire(self, hit: Hit) -> None:
        if hit.detector not in self._fired:
            self._fired.add(hit.detector)
            self.hits.append(hit)

    def add(self, item) -> None:  # noqa: ANN001
        kind = type(item)
        if kind in STEP_TYPES:
            self._step(item)
        elif kind is Arrivals:
            for rid, tokens in zip(item.request_ids, item.prompt_tokens):
                self._order[rid] = len(self._order)
                self._unadmitted[rid] = 0
                self._arrived[rid] = item.step
                self._waiting_tokens[rid] = self._prompt_tokens[rid] = tokens
        elif kind is Header:
            self._stalls = StallWatch(seat_limit(item)) if kind_of(item.engine).watches_stalls \
                else None
            self._block_size = block_size_of(item)
        elif kind is EngineAborted:
            name = "abort" if item.message.startswith(V0_SWAP_ABORT) else "exception"
            how = ("; new prefills had been admitted while groups were swapped out (#5578's "
                   "mechanism)" if name == "abort" and self._admitted_while_swapped else "")
            self._fire(Hit(detector=name, step=item.step, what=(
                f"vLLM raised {item.error}: {item.message} ({item.running} running, "
                f"{item.waiting} waiting, {item.swapped} swapped, GPU {item.gpu_used}/"
                f"{item.gpu_total}, CPU {item.cpu_used}/{item.cpu_total} blocks){how}"),
                state=f"{item.error}: {_words(item.message)}"
                      + (" after admitting while swapped" if how else "")))
        elif kind is LogLine and item.logger == progress.LOGGER:
            self._guard_line = item.message
        elif kind is RunFinished and item.reason == progress.REASON:
            s = self.last_step
            self._fire(Hit(detector="livelock", step=item.steps, what=(
                f"the no-progress guard ended the run: {self._guard_line}"),
                state=_head(s) if s is not None else "no step"))

    def _step(self, s) -> None:  # noqa: ANN001
        self.last_step = s
        v1 = type(s) is V1StepRecord
        admitted = [rid for rid, _ in (s.new if v1 else s.prefills)]
        for rid in admitted:
            self._passed.discard(rid)
            if self._unadmitted.pop(rid, None) is not None and not v1 and s.swapped:
                self._admitted_while_swapped = True
        for rid in s.finished:
            rank = self._order.get(rid)
            if rank is None:
                continue
            for waiting, count in self._unadmitted.items():
                if self._order[waiting] < rank:
                    self._unadmitted[waiting] = count = count + 1
                    if count >= self.starve_m:
                        self._passed.add(waiting)
        if self._passed and "starvation" not in self._fired:
            self._starved(s)
        victims = ([rid for rid, _, _ in s.preempted] if v1
                   else list(s.recomputed) + list(s.swapped_out))
        for rid in victims:
            count = self._times_preempted[rid] = self._times_preempted.get(rid, 0) + 1
            if count >= self.thrash_k:
                mode = "recompute" if v1 or rid in s.recomputed else "swap"
                self._fire(Hit(detector="thrash", step=s.step, request=rid, what=(
                    f"request {rid} was preempted for the {count}th time ({mode}; "
                    f"{s.running} running, {s.waiting} waiting, GPU {s.gpu_used}/"
                    f"{s.gpu_total} blocks)"), state=mode))
        if s.batched_tokens == 0 and s.waiting > 0 and not getattr(s, "cpu_in_flight", 0):
            self._idle += 1
            if self._idle >= self.livelock_n:
                self._fire(Hit(detector="livelock", step=s.step, what=(
                    f"{self._idle} steps in a row scheduled no token while {s.waiting} "
                    f"requests waited and the budget of {s.token_budget} tokens was unused "
                    f"({s.running} running, GPU {s.gpu_used}/{s.gpu_total} blocks)"),
                    state=_head(s)))
        else:
            self._idle = 0
        if self._stalls is not None:  # the engine kinds whose records a stall reads
            self._follow_queue(s)
            self._stalls.add(s)
            stall = self._stalls.current
            if stall is not None and "stall" not in self._fired and not self._capacity_wait(s):
                self._fire(Hit(detector="stall", step=s.step, what=(
                    f"no admission for {stall.steps} steps (since step {stall.since}) while "
                    f"{stall.waiting} requests waited with {stall.free_pct:.0f}% of the KV "
                    f"cache free" + (f"; the head request waited for {stall.reason}"
                                     if stall.reason else "")),
                    state=_head(s) + _queue(stall.waiting)))

    def _starved(self, s) -> None:  # noqa: ANN001
        """Fire for the first-arrived of the passed requests that has waited starve_steps."""
        for waiting in sorted(self._passed, key=self._order.__getitem__):
            waited = s.step - self._arrived[waiting]
            if waited >= self.starve_steps:
                self._fire(Hit(detector="starvation", step=s.step, request=waiting, what=(
                    f"request {waiting} was never admitted in {waited} steps while "
                    f"{self._unadmitted[waiting]} requests that arrived after it finished"),
                    state=_head(s)))
                return

    def _follow_queue(self, s: V1StepRecord) -> None:
        """Keep `_waiting_tokens` to the requests still waiting after step `s`."""
        tokens = self._waiting_tokens
        for rid, _ in s.new:
            tokens.pop(rid, None)
        for rid, _ in s.resumed:
            tokens.pop(rid, None)
        for rid in s.finished:
            tokens.pop(rid, None)
        for rid, lost, _ in s.preempted:  # its context: its prompt, or what it had computed
            tokens[rid] = max(self._prompt_tokens.get(rid, 0), lost + 1)

    def _capacity_wait(self, s: V1StepRecord) -> bool:
        """Whether step `s`'s refusal is capacity, not a stall: the head waits for more KV
        blocks than vLLM counts free, and no waiting request's whole context fits in them.
        A whole context, not a first chunk: a prompt whose blocks sit in the prefix cache
        takes them all at once (the evictable ones count against the free)."""
        if (s.head_reason != "kv_blocks" or s.head_need is None or s.head_limit is None
                or s.head_need <= s.head_limit):
            return False
        shortest = min(self._waiting_tokens.values(), default=None)
        return shortest is None or -(-shortest // self._block_size) > s.head_limit
