"""The observatory's hooks on vLLM's V1 Scheduler: observation and the V1 policies.

`attach(scheduler)` instruments an existing `vllm.v1.core.sched.scheduler.Scheduler` instance,
however it was built, without subclassing it: it wraps three bound methods on the instance.
What each reads or wraps of vLLM's private API is in the release family's module
(family_v033.py); this module is the logic.

- `schedule` (public): the step boundary. Applies a pending policy change, sets vLLM's own
  `scheduler_reserve_full_isl` for `full-isl`, captures the SchedulerOutput, and counts the
  tokens each request computes again after a preemption (against the most it ever computed).
- `_preempt_request`: captures each victim and the computed tokens it loses (V1 preempts only
  by recompute: vLLM frees its blocks and sets its computed tokens to 0).
- `kv_cache_manager.allocate_slots`, two rules, each with vLLM's own arithmetic:
  - `whole-context` (admission): a waiting or preempted request is refused unless the free
    blocks hold its whole context (prompt plus outputs so far) plus what the prefills in
    flight still need to finish (the scheduler's own `_inflight_prefill_reserved_blocks()`,
    which 0.33 applies only to async KV loads, and which its `scheduler_reserve_full_isl`
    check ignores). The refusal is None, what vLLM's allocator returns when blocks are short,
    so vLLM's own code stops admitting this step.
  - `least-computed` (victim, vLLM PR #53723): when a running request's allocation fails, vLLM's
    FCFS path preempts `running[-1]`, the last admitted. Before it looks, the hook moves the
    request with the fewest computed tokens among those not yet scheduled this step (the one
    being allocated and those after it, which vLLM's FCFS bookkeeping requires; the latest on a
    tie) to the end of the list, so vLLM's own code preempts it and the others keep their order.
  - full ISL where vLLM has no `scheduler_reserve_full_isl` (0.18: `fam.NATIVE_FULL_ISL`
    False): a waiting or preempted request is refused unless its whole context fits in the
    free blocks, vLLM 0.29+'s own `full_sequence_must_fit` check (`fam.full_isl_fits`), under
    `full-isl` or when the run configures it (`--reserve-full-isl`).
  With `off` and `full-isl` it calls the original and changes nothing where vLLM has the
  option.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from engine.adapters.driver import HookError  # the Session catches it: our bug, not vLLM's
from engine.adapters.hook_base import OwnCode, PolicySwitch
from engine.adapters.v1.current import fam
from engine.policy import Policy, parse_policy


_OWN_PREEMPT = OwnCode("hook _preempt_request")
_OWN_ALLOCATE = OwnCode("hook allocate_slots")


class V1Capture(msgspec.Struct):
    """What the hooks saw during one `Scheduler.schedule()` call.

    One is made every step, inside vLLM's: a Struct, whose constructor (C, with its empty
    lists copied in C) costs a tenth of a dataclass's with default factories. Never encoded."""

    policy: Policy
    output: Any = None  # vLLM's SchedulerOutput
    preempted: list[tuple[str, int, int]] = []  # (id, lost, count)
    recomputed_tokens: int = 0
    prompt_tokens: int = 0  # scheduled before a request's sample: chunks and recompute
    generated_tokens: int = 0  # requests that sample this step
    decode_reqs: int = 0  # requests scheduled exactly their next token
    first_tokens: list[str] = []
    new_ids: list[str] = []  # admitted for the first time
    resumed_ids: set[str] = set()  # admitted again after a preemption
    withheld: bool = False
    held_back: int = 0


class V1SchedulerHook(PolicySwitch):
    """Handle returned by `attach`. Thread-safe policy changes, applied at step boundaries.

    It runs inside every step of the engine it watches, so its step path is kept to a few
    microseconds (bench/bench_v1.py): no lock unless a switch is pending, `try` rather than a
    context manager around its own code (free in Python 3.11 until something raises), one C
    call per request to read it (`fam.request_progress`), and the `allocate_slots` wrapper on
    vLLM's KV manager only while a policy rule needs it (`off` and `full-isl` change nothing
    there where vLLM has its own full-ISL option, and vLLM calls it once per scheduled
    request).
    """

    def __init__(self, scheduler: Any, policy: Policy) -> None:
        super().__init__(policy)
        self.scheduler = scheduler
        self._originals: dict[str, Callable[..., Any]] = {}
        self.configured_full_isl = fam.reserve_full_isl(scheduler)  # vLLM as configured
        self.block_size = fam.block_size(scheduler)
        self.current = V1Capture(policy)
        self._hook_full_isl = False  # the hook enforces full ISL (sync_policy says when)
        self.high_water: dict[str, int] = {}  # request id -> most tokens it ever had computed
        # what goes on the KV manager while a rule needs it (attach's Guard wraps it)
        self.allocate_entry: Callable[..., Any] = self._allocate_slots
        self._schedule_original: Callable[..., Any] | None = None  # vLLM's, bound (_install)

    # ----------------------------------------------------------------- policy control
    def sync_policy(self) -> None:
        """Make vLLM match the policy in force: its own `scheduler_reserve_full_isl`, and the
        `allocate_slots` wrapper on or off."""
        policy = self._policy
        full_isl = policy.admission == "full-isl" or self.configured_full_isl
        fam.set_reserve_full_isl(self.scheduler, full_isl)
        # a release without vLLM's option (fam.NATIVE_FULL_ISL False) has the hook enforce it
        self._hook_full_isl = full_isl and not fam.NATIVE_FULL_ISL
        manager = vars(fam.kv_cache_manager(self.scheduler))
        if (policy.admission == "whole-context" or policy.victim == "least-computed"
                or self._hook_full_isl):
            manager["allocate_slots"] = self.allocate_entry
        else:
            manager.pop("allocate_slots", None)

    # ----------------------------------------------------------------- wrappers
    def _install(self) -> None:
        scheduler = self.scheduler
        for name in ("schedule", "_preempt_request"):
            if name in vars(scheduler):
                raise RuntimeError(f"scheduler already has an instance attribute {name!r}; "
                                   f"is an observatory hook already attached?")
            self._originals[name] = getattr(scheduler, name)
        manager = fam.kv_cache_manager(scheduler)
        self._originals["allocate_slots"] = manager.allocate_slots
        self._schedule_original = self._originals["schedule"]
        scheduler.schedule = self._schedule
        scheduler._preempt_request = self._preempt_request

    def detach(self) -> None:
        """Put the scheduler back as it was."""
        vars(self.scheduler).pop("schedule", None)
        vars(self.scheduler).pop("_preempt_request", None)
        vars(fam.kv_cache_manager(self.scheduler)).pop("allocate_slots", None)
        fam.set_reserve_full_isl(self.scheduler, self.configured_full_isl)
        self._originals.clear()
        self._schedule_original = None

    def _schedule(self, *args, **kwargs):  # noqa: ANN002, ANN003
        try:
            if self._pending is not None and self._apply_pending():
                self.sync_policy()
            self.current = capture = V1Capture(self._policy)
        except Exception as exc:
            raise HookError("hook schedule", exc) from exc
        output = self._schedule_original(*args, **kwargs)
        try:
            capture.output = output
            self._count_tokens(capture, output)
            self.steps_scheduled += 1
        except Exception as exc:
            raise HookError("hook schedule", exc) from exc
        return output

    def _count_tokens(self, capture: V1Capture, output: Any) -> None:
        """Classify the step's scheduled tokens before the step samples. Recomputed: tokens a
        request had computed before and lost (its range [computed before, + scheduled) against
        the most it ever computed). A request samples when that range reaches its whole
        context (prompt plus outputs so far); exactly its next token is a decode, anything
        else is prefill (a chunk, or a recompute)."""
        high = self.high_water
        finished = fam.finished_ids(output)
        if finished:
            for rid in finished:
                high.pop(rid, None)
        requests = fam.requests(self.scheduler)
        progress = fam.request_progress
        again = prompt = generated = decode = 0
        first: list[str] = []
        for rid, n in fam.scheduled_tokens(output).items():
            # computed: vLLM already advanced it by n; context: prompt plus outputs so far
            end, context, outputs = progress(requests[rid])
            start = end - n
            before = high.get(rid, 0)
            if end > before:
                high[rid] = end
                if before > start:
                    again += before - start
            elif before > start:
                again += end - start
            if end < context:
                prompt += n
                continue
            generated += 1
            if outputs == 0:
                first.append(rid)
            if n == 1 and outputs > 0:
                decode += 1
            else:
                prompt += n
        capture.recomputed_tokens = again
        capture.prompt_tokens = prompt
        capture.generated_tokens = generated
        capture.decode_reqs = decode
        capture.first_tokens = first
        capture.new_ids, capture.resumed_ids = fam.admissions(output, requests)

    def _preempt_request(self, request: Any, *args, **kwargs):  # noqa: ANN002, ANN003
        with _OWN_PREEMPT:
            lost = fam.computed_tokens(request)
        result = self._originals["_preempt_request"](request, *args, **kwargs)
        with _OWN_PREEMPT:
            self.current.preempted.append((fam.request_id(request), lost,
                                           fam.preemptions(request)))
        return result

    def _allocate_slots(self, request: Any, num_new_tokens: int, *args, **kwargs):  # noqa
        with _OWN_ALLOCATE:
            policy = self._policy
            admitting = fam.is_admitting(request)
            if (admitting and policy.admission == "whole-context"
                    and not self._whole_context_fits(request)):
                capture = self.current
                capture.withheld = True
                capture.held_back = fam.waiting_count(self.scheduler)
                return None  # what vLLM's allocator says when the blocks are not there
            if (admitting and self._hook_full_isl
                    and not fam.full_isl_fits(self.scheduler, request, args, kwargs)):
                return None  # vLLM's own full-ISL refusal (0.29+), where it has none
        blocks = self._originals["allocate_slots"](request, num_new_tokens, *args, **kwargs)
        if blocks is None and not admitting and policy.victim == "least-computed":
            with _OWN_ALLOCATE:
                self._put_victim_last(request)
        return blocks

    # ----------------------------------------------------------------- the rules
    def _whole_context_fits(self, request: Any) -> bool:
        """The free blocks hold `request`'s whole context (prompt plus outputs so far) beside
        what the prefills in flight still need to finish, both by vLLM's own arithmetic."""
        scheduler = self.scheduler
        need = fam.blocks_to_reach(scheduler, request, fam.context_tokens(request))
        return need + fam.inflight_reserved_blocks(scheduler, besides=request) \
            <= fam.free_blocks(scheduler)

    # ----------------------------------------------------------------- the victim
    def _put_victim_last(self, current: Any) -> None:
        """Move the least-computed request among `current` and those after it in the running
        list to the end, where vLLM's FCFS preemption takes its victim."""
        running = fam.running(self.scheduler)
        start = next((i for i in range(len(running) - 1, -1, -1) if running[i] is current),
                     None)
        if start is None:
            return
        best = len(running) - 1
        best_tokens = fam.computed_tokens(running[best])
        for i in range(len(running) - 2, start - 1, -1):  # latest first: ties keep the latest
            tokens = fam.computed_tokens(running[i])
            if tokens < best_tokens:
                best, best_tokens = i, tokens
        if best != len(running) - 1:
            running.append(running.pop(best))


def attach(scheduler: Any, policy: str | Policy = "off") -> V1SchedulerHook:
    """Instrument `scheduler` in place and return the handle that controls the policy."""
    hook = V1SchedulerHook(scheduler, parse_policy(policy))
    hook._install()
    hook.sync_policy()
    return hook
