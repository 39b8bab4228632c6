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
  option; under every policy it is on while requests wait, to see vLLM refuse an admission
  (below).
- `_handle_blocked_waiting_request` (0.33+), only under `skip-and-continue` (vLLM PR #35852's
  waiting-phase rule, for #31731): vLLM's scan stops at the first admission `allocate_slots`
  refuses. The hook notes what that request was refused (blocks needed, as `_refused` counts
  them) and, from the next step, has vLLM's scan pass it by through the scan's own skip path
  while the free blocks stay short of that need, so the requests behind it are tried. Once
  the blocks are there it is tried again, first, and vLLM decides. Releases without that path
  (0.18, 0.29) refuse the policy in one line.
- `schedule` itself, only under `per-iteration-count` (vLLM PR #45339's rule, for #45257):
  under async scheduling vLLM's waiting scan counts every running request against
  `max_num_seqs`, also those its running loop passes by because the step in flight samples
  their last token. While vLLM's `schedule()` runs, its seat limits are raised by the number
  of those requests (`fam.finals_in_flight`, vLLM's own condition) and put back as it returns.

Why the waiting wait (issue #28): as `schedule()` returns, the hook reads the first reason
vLLM's scan turned the head waiting request down, in the order the scan checks them (see
`_head_reason`): a step that preempted (vLLM then admits no one), the token budget spent, the
seats taken (`max_num_seqs`, or `max_num_active_seqs`), the request's own blocked status (an
async KV load, a grammar, streaming input), an `allocate_slots` refusal of an admission this
step (blocks needed and free, as vLLM's allocator counted them), the observatory's own policy
holding it back; else "other" (vLLM's LoRA, encoder, connector or stale-output checks, which
the sim never sets up).
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from engine.adapters.driver import HookError  # the Session catches it: our bug, not vLLM's
from engine.adapters.hook_base import OwnCode, PolicySwitch
from engine.adapters.v1.current import fam
from engine.adapters.policy_support import INSTALLED
from engine.policy import Policy, PolicyEngine, parse_policy, require_capable


_OWN_PREEMPT = OwnCode("hook _preempt_request")
_OWN_ALLOCATE = OwnCode("hook allocate_slots")
_OWN_SKIP = OwnCode("hook _handle_blocked_waiting_request")
_OWN_SEATS = OwnCode("hook schedule (per-iteration-count)")


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
    refused: tuple[int, int] | None = None  # vLLM refused an admission's blocks: (need, free)
    head_reason: str = ""  # why the head waiting request was not admitted ("": none waits)
    head_need: int = 0  # what it needed: seats taken, tokens scheduled, blocks needed
    head_limit: int = 0  # what there was: the seat limit, the token budget, blocks free


class V1SchedulerHook(PolicySwitch):
    """Handle returned by `attach`. Thread-safe policy changes, applied at step boundaries.

    It runs inside every step of the engine it watches, so its step path is kept to a few
    microseconds (bench/bench_v1.py): no lock unless a switch is pending, `try` rather than a
    context manager around its own code (free in Python 3.11 until something raises), one C
    call per request to read it (`fam.request_progress`), and the `allocate_slots` wrapper on
    vLLM's KV manager only while a policy rule needs it or requests wait (vLLM calls it once
    per scheduled request; under `off` it only looks at what vLLM answers).
    """

    def __init__(self, scheduler: Any, policy: Policy) -> None:
        super().__init__(policy)
        self.scheduler = scheduler
        self._originals: dict[str, Callable[..., Any]] = {}
        self.configured_full_isl = fam.reserve_full_isl(scheduler)  # vLLM as configured
        self.block_size = fam.block_size(scheduler)
        self.current = V1Capture(policy)
        self._hook_full_isl = False  # the hook enforces full ISL (sync_policy says when)
        self._rules = False  # a policy rule runs in allocate_slots (sync_policy says when)
        self._observing = False  # the allocate_slots wrapper is on vLLM's KV manager
        self.high_water: dict[str, int] = {}  # request id -> most tokens it ever had computed
        # what goes on the KV manager while a rule needs it (attach's Guard wraps it)
        self.allocate_entry: Callable[..., Any] = self._allocate_slots
        self._schedule_original: Callable[..., Any] | None = None  # vLLM's, bound (_install)
        # skip-and-continue: request id -> blocks vLLM refused it (the scan passes it by
        # while fewer are free)
        self.skipping: dict[str, int] = {}
        self._scan_skip = False  # the skip gate is on vLLM's scan (sync_policy says when)

    def require(self, policy: Policy) -> None:
        require_on(self.scheduler, policy)

    # ----------------------------------------------------------------- policy control
    def sync_policy(self) -> None:
        """Make vLLM match the policy in force: its own `scheduler_reserve_full_isl`, and the
        `allocate_slots` wrapper on or off."""
        policy = self._policy
        full_isl = policy.admission == "full-isl" or self.configured_full_isl
        fam.set_reserve_full_isl(self.scheduler, full_isl)
        # a release without vLLM's option (fam.NATIVE_FULL_ISL False) has the hook enforce it
        self._hook_full_isl = full_isl and not fam.NATIVE_FULL_ISL
        self._rules = (policy.admission == "whole-context" or policy.victim == "least-computed"
                       or self._hook_full_isl)
        self._observe_admissions(force=True)
        skip = policy.order == "skip-and-continue"
        if skip and not self._scan_skip:
            fam.install_scan_skip(self.scheduler, self._passes_by)
        elif not skip and self._scan_skip:
            fam.remove_scan_skip(self.scheduler)
        if not skip:
            self.skipping.clear()
        self._scan_skip = skip
        self._sync_seats(policy)

    def _observe_admissions(self, force: bool = False) -> None:
        """The `allocate_slots` wrapper on vLLM's KV manager while a rule needs it or requests
        wait (an admission vLLM refuses is the reason they wait), off otherwise: vLLM calls
        it once per scheduled request, and a step with no one waiting has nothing to see."""
        want = self._rules or fam.waiting_count(self.scheduler) > 0
        if want == self._observing and not force:
            return
        manager = vars(fam.kv_cache_manager(self.scheduler))
        if want:
            if force or "allocate_slots" not in manager:
                manager["allocate_slots"] = self.allocate_entry
        elif force or manager.get("allocate_slots") is self.allocate_entry:
            manager.pop("allocate_slots", None)
        # between policy changes it never takes off or covers what someone else put there
        # (vLLM's own tests patch the instance): the engine keeps what they chose
        self._observing = want

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
        if self._scan_skip:
            fam.remove_scan_skip(self.scheduler)
            self._scan_skip = False
        fam.set_reserve_full_isl(self.scheduler, self.configured_full_isl)
        self._originals.clear()
        self._schedule_original = None

    def _schedule(self, *args, **kwargs):  # noqa: ANN002, ANN003
        try:
            if self._pending is not None and self._apply_pending():
                self.sync_policy()
            self._observe_admissions()
            self.current = capture = V1Capture(self._policy)
        except Exception as exc:
            raise HookError("hook schedule", exc) from exc
        output = self._schedule_original(*args, **kwargs)
        try:
            capture.output = output
            self._count_tokens(capture, output)
            self._head_reason(capture, output)
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
            skipping = self.skipping
            for rid in finished:
                high.pop(rid, None)
                if skipping:
                    skipping.pop(rid, None)
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

    def _head_reason(self, capture: V1Capture, output: Any) -> None:
        """Why the request vLLM's scan takes first next step was not admitted in this one,
        read as `schedule()` returns (before the step's outcome frees anything), in the order
        vLLM's scan checks: a step that preempted skips the waiting queues; the scan stops
        while the token budget is spent or the seats are taken; it skips a request whose
        status blocks it; it stops at an admission `allocate_slots` refused (the observatory's
        own rule, `withheld`, refuses the same way)."""
        scheduler = self.scheduler
        head = fam.head_waiting(scheduler)
        if head is None:
            return
        if capture.preempted:
            capture.head_reason = "preempted"
            capture.head_need = len(capture.preempted)
            return
        scheduled, budget = fam.total_scheduled_tokens(output), fam.token_budget(scheduler)
        if scheduled >= budget:
            capture.head_reason = "token_budget"
            capture.head_need, capture.head_limit = scheduled, budget
            return
        name, taken, limit = fam.seats(scheduler)
        if taken >= limit:
            capture.head_reason = "active_seats" if name == "max_num_active_seqs" else "seats"
            capture.head_need, capture.head_limit = taken, limit
            return
        blocked = fam.blocked_reason(head)
        skipped = self.skipping.get(fam.request_id(head)) if self.skipping else None
        if blocked:
            capture.head_reason = blocked
        elif skipped is not None:  # skip-and-continue passed it by: its blocks are short
            capture.head_reason = "kv_blocks"
            capture.head_need, capture.head_limit = skipped, fam.free_blocks(scheduler)
        elif capture.withheld:
            capture.head_reason = "policy"
        elif capture.refused is not None:
            capture.head_reason = "kv_blocks"
            capture.head_need, capture.head_limit = capture.refused
        else:
            capture.head_reason = "other"

    def _preempt_request(self, request: Any, *args, **kwargs):  # noqa: ANN002, ANN003
        with _OWN_PREEMPT:
            lost = fam.computed_tokens(request)
        result = self._originals["_preempt_request"](request, *args, **kwargs)
        with _OWN_PREEMPT:
            self.current.preempted.append((fam.request_id(request), lost,
                                           fam.preemptions(request)))
        return result

    def _allocate_slots(self, request: Any, num_new_tokens: int, *args, **kwargs):  # noqa
        if self._rules:
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
                    # what it refused is the whole context, as vLLM's own check counts it
                    self._refused(request, num_new_tokens, args,
                                  {**kwargs, "full_sequence_must_fit": True})
                    return None  # vLLM's own full-ISL refusal (0.29+), where it has none
        blocks = self._originals["allocate_slots"](request, num_new_tokens, *args, **kwargs)
        if blocks is None:
            with _OWN_ALLOCATE:
                if fam.is_admitting(request):  # a refusal leaves the request as it was
                    self._refused(request, num_new_tokens, args, kwargs)
                elif self._policy.victim == "least-computed":
                    self._put_victim_last(request)
        return blocks

    def _refused(self, request: Any, num_new_tokens: int, args: tuple,
                 kwargs: dict[str, Any]) -> None:
        """Note the blocks an admission vLLM refused needed, and those free (the first
        refusal of the step: vLLM's scan stops there), and under skip-and-continue what each
        refused request needs, for the scan to pass it by while fewer are free."""
        capture = self.current
        if capture.refused is not None and not self._scan_skip:
            return
        counted = fam.refused_blocks(self.scheduler, request, num_new_tokens, args, kwargs)
        if capture.refused is None:
            capture.refused = counted
        if self._scan_skip:
            self.skipping[fam.request_id(request)] = counted[0]

    # ----------------------------------------------------------------- the rules
    def _whole_context_fits(self, request: Any) -> bool:
        """The free blocks hold `request`'s whole context (prompt plus outputs so far) beside
        what the prefills in flight still need to finish, both by vLLM's own arithmetic."""
        scheduler = self.scheduler
        need = fam.blocks_to_reach(scheduler, request, fam.context_tokens(request))
        return need + fam.inflight_reserved_blocks(scheduler, besides=request) \
            <= fam.free_blocks(scheduler)

    # ----------------------------------------------------------------- the scan's order
    def _passes_by(self, request: Any) -> bool:
        """skip-and-continue: whether vLLM's scan passes `request` by this time (it was
        refused blocks, and fewer than it needed are free). Asked by vLLM's scan of each
        waiting request it looks at; a request the blocks are back for is forgotten and
        tried again, and vLLM decides."""
        skipping = self.skipping
        if not skipping:
            return False
        with _OWN_SKIP:
            rid = fam.request_id(request)
            need = skipping.get(rid)
            if need is None:
                return False
            if fam.free_blocks(self.scheduler) < need:
                return True
            del skipping[rid]
            return False

    # ----------------------------------------------------------------- the seats
    def _sync_seats(self, policy: Policy) -> None:
        """per-iteration-count: vLLM's `schedule` is called through `_schedule_per_iteration`
        while the policy is in force (the hook's `_schedule` calls whatever
        `_schedule_original` is, after it applied a pending switch: the rule acts from the
        step the switch lands on)."""
        original = self._originals.get("schedule")
        if original is None:  # before _install: attach calls sync_policy again after it
            return
        # never on an engine with a real model runner (attach refuses it there; a live switch
        # to it leaves vLLM's count as it is): its batch holds max_num_seqs requests
        per_iteration = (policy.seats == "per-iteration-count" and fam.HAS_ASYNC_SIM
                         and fam.runs_sim(self.scheduler))
        self._schedule_original = (self._schedule_per_iteration if per_iteration
                                   else original)

    def _schedule_per_iteration(self, *args, **kwargs):  # noqa: ANN002, ANN003
        """vLLM PR #45339's rule for #45257, through vLLM's own scan: while `schedule()` runs,
        its seat limits are raised by the running requests it will pass by because the step
        in flight samples their last token, so its waiting loop counts the sequences this
        iteration schedules; put back as it returns (or raises)."""
        scheduler = self.scheduler
        with _OWN_SEATS:
            extra = fam.finals_in_flight(scheduler)
            saved = fam.widen_seats(scheduler, extra) if extra else None
        try:
            return self._originals["schedule"](*args, **kwargs)
        finally:
            if saved is not None:
                with _OWN_SEATS:
                    fam.set_seats(scheduler, saved)

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


def scheduler_engine(scheduler: Any) -> PolicyEngine:
    """The engine `scheduler` runs in, as engine.policy asks it: whether it schedules
    asynchronously and runs the sim is read from vLLM's configs on a release whose sim can
    schedule asynchronously (before that, per-iteration-count is refused on the release)."""
    if fam.HAS_ASYNC_SIM:
        return PolicyEngine("v1", INSTALLED, fam.is_async(scheduler), fam.runs_sim(scheduler))
    return PolicyEngine("v1", INSTALLED)


def require_on(scheduler: Any, policy: Policy) -> None:
    """Raise ConfigError (one line) if `policy` cannot act on this scheduler's engine
    (engine.policy.require_capable). Asked where no spec was (an engine a user's program
    built: attach, and its switches, in the asker's thread), so a refusal never reaches
    vLLM's step."""
    require_capable(policy, scheduler_engine(scheduler))


def attach(scheduler: Any, policy: str | Policy = "off", *,
           asked: bool = False) -> V1SchedulerHook:
    """Instrument `scheduler` in place and return the handle that controls the policy.
    `asked`: the caller has asked engine.policy already (a Session, of its spec's engine)."""
    policy = parse_policy(policy)
    if not asked:
        require_on(scheduler, policy)
    hook = V1SchedulerHook(scheduler, policy)
    hook._install()
    hook.sync_policy()
    return hook
