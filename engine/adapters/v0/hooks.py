"""Every hook into vLLM's private scheduler internals lives in engine/adapters, and the part
that is the same for every supported release lives here.

`attach(scheduler)` instruments an existing `vllm.core.scheduler.Scheduler` instance, however
it was built, without subclassing it: it wraps four bound methods on the instance itself.

- `schedule` (public): marks the step boundary, applies a pending policy change, and captures
  the `SchedulerOutputs` of the step.
- `_schedule_running`: captures the running pass (who was preempted, by swap or recompute).
- `_schedule_swapped`: captures the swap-in pass (who came back, who is still swapped).
- `_schedule_prefills`: the gate. With a chunked-prefill step and a policy that withholds, it
  returns what vLLM's own code produces when nothing fits (an empty `SchedulerPrefillOutputs`,
  the waiting queue untouched), so the rest of `_schedule_chunked_prefill` runs unchanged. With
  policy ``off`` it calls the original and changes nothing. Under ``reserve`` it lets vLLM's own
  pass see only the head of the waiting queue that fits the reserve (`admissible`), and puts
  the rest back behind whatever vLLM left.
- `_preempt`: under ``reserve``, a single-sequence victim whose swap-out would not fit in the
  free CPU blocks is preempted by vLLM's own `_preempt_by_recompute` instead of raising "Aborted
  due to the lack of CPU swap space". Otherwise it calls the original.

`demand()` measures the committed demand (engine.policy.Demand): the worst-case blocks of every
admitted group, counted the way the release's block manager counts them. It is read at the start
of `schedule()`, when vLLM's queues are whole (from 0.5.4 the passes pop groups off `running` and
put them back only at the end), and at the end of each step for the record.

The three pass wrappers differ by vLLM release (their signatures and return values changed in
0.5.4); each adapter family (engine/adapters/v0/family_*.py, chosen by engine.adapters.versions)
builds them and reports what it saw through `SchedulerHook.saw_running/saw_swapped/withholds`.
Ids in captures are requests: from 0.6.4 on, the parent of a fanned-out group.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Callable, Iterable, Iterator

from engine.adapters.driver import HookError  # noqa: F401  (raised here; the Session catches it)
from engine.adapters.hook_base import OwnCode, PolicySwitch
from engine.adapters.versions import family
from engine.policy import (Demand, Policy, PrefillGate, admissible, parse_policy,
                           withholds_prefills)

_WRAPPED = ("schedule", "_schedule_running", "_schedule_swapped", "_schedule_prefills",
            "_preempt", "free_seq")


_OWN = {name: OwnCode(f"hook {name}") for name in _WRAPPED}


@dataclass
class StepCapture:
    """What the hooks saw during one `Scheduler.schedule()` call."""

    policy: Policy
    outputs: Any = None  # vLLM's SchedulerOutputs
    swapped_out: list[str] = field(default_factory=list)
    recomputed: list[str] = field(default_factory=list)
    swapped_in: list[str] = field(default_factory=list)
    infeasible: list[str] = field(default_factory=list)
    preempted_this_step: int = 0
    still_swapped: int | None = None  # None: the swap-in pass did not run this step
    swapped_out_seqs: int = 0  # sequences in the swapped-out groups
    swapped_in_seqs: int = 0
    withheld: bool = False
    held_back: int = 0
    demand: Demand | None = None  # committed demand at the start of the step (reserve only)
    recomputed_not_swapped: int = 0  # victims reserve recomputed because the CPU was full
    # (seq id, output tokens) of each sequence vLLM freed because it finished (free_seq)
    finished_seqs: list[tuple[int, int]] = field(default_factory=list)


class SchedulerHook(PolicySwitch):
    """Handle returned by `attach`. Thread-safe policy changes, applied at step boundaries."""

    def __init__(self, scheduler: Any, policy: Policy) -> None:
        super().__init__(policy)
        self.scheduler = scheduler
        self._family = family()
        self._originals: dict[str, Callable[..., Any]] = {}
        self.current = StepCapture(policy)
        # groups preempted by recompute: back in `waiting` but admitted (their demand counts)
        self._parked: dict[str, Any] = {}

    # ----------------------------------------------------------------- wrappers
    def _install(self) -> None:
        scheduler = self.scheduler
        for name in _WRAPPED:
            if name in vars(scheduler):
                raise RuntimeError(f"scheduler already has an instance attribute {name!r}; "
                                   f"is an observatory hook already attached?")
            self._originals[name] = getattr(scheduler, name)
        scheduler.schedule = self._schedule
        scheduler._preempt = self._preempt
        scheduler.free_seq = self._free_seq
        for name, wrapper in self._family.wrappers(self, self._originals).items():
            setattr(scheduler, name, wrapper)

    def detach(self) -> None:
        """Put the scheduler back as it was."""
        for name in self._originals:
            vars(self.scheduler).pop(name, None)
        self._originals.clear()

    def _schedule(self):
        with _OWN["schedule"]:
            self._apply_pending()
            self.current = capture = StepCapture(self._policy)
            if self._policy.name == "reserve":
                capture.demand = self.demand()
        result = self._originals["schedule"]()
        with _OWN["schedule"]:
            capture.outputs = result[1]
            self.steps_scheduled += 1
        return result

    # ----------------------------------------------------------------- called by the families
    def saw_running(self, swapped_out: list, preempted: list) -> None:
        """The running pass swapped out `swapped_out` and recomputed `preempted` (groups)."""
        with _OWN["_schedule_running"]:
            capture = self.current
            rid = self._family.request_id
            capture.swapped_out = _unique(rid(g) for g in swapped_out)
            capture.swapped_out_seqs = sum(g.num_seqs() for g in swapped_out)
            capture.recomputed = _unique(rid(g) for g in preempted)
            capture.preempted_this_step = len(swapped_out) + len(preempted)
            for group in preempted:
                self._parked[group.request_id] = group

    def saw_swapped(self, still_swapped: int, swapped_in: list, infeasible: list) -> None:
        """The swap-in pass left `still_swapped` groups swapped and brought back `swapped_in`."""
        with _OWN["_schedule_swapped"]:
            capture = self.current
            rid = self._family.request_id
            capture.still_swapped = still_swapped
            capture.swapped_in = _unique(rid(g) for g in swapped_in)
            capture.swapped_in_seqs = sum(g.num_seqs() for g in swapped_in)
            capture.infeasible = _unique(rid(g) for g in infeasible)

    def withholds(self, enable_chunking: bool, waiting: int) -> bool:
        """Whether the policy withholds this step's prefills (`waiting` groups are waiting)."""
        with _OWN["_schedule_prefills"]:
            policy = self._policy
            if not (enable_chunking and policy.name != "off" and waiting):
                return False
            capture = self.current
            still = capture.still_swapped
            gate = PrefillGate(
                preempted_this_step=capture.preempted_this_step,
                still_swapped=len(self.scheduler.swapped) if still is None else still,
                cpu_usage=cpu_usage(self.scheduler),
            )
            withhold = withholds_prefills(policy, gate)
            if withhold:
                capture.withheld = True
                capture.held_back = waiting
            return withhold


    def _preempt(self, seq_group: Any, blocks_to_swap_out: Any, *args: Any, **kwargs: Any):
        """vLLM's `_preempt`, except that under `reserve` a single-sequence group whose
        swap-out would not fit in the CPU is recomputed (vLLM's own path for such groups when
        no preemption mode is forced) instead of aborting the engine."""
        with _OWN["_preempt"]:
            scheduler = self.scheduler
            recompute = (self._policy.name == "reserve"
                         and seq_group.get_max_num_running_seqs() == 1
                         and not scheduler.block_manager.can_swap_out(seq_group))
            if recompute:
                mode = self._family.PreemptionMode.RECOMPUTE
                self.current.recomputed_not_swapped += 1
        if not recompute:
            return self._originals["_preempt"](seq_group, blocks_to_swap_out, *args, **kwargs)
        scheduler.num_cumulative_preemption += 1
        scheduler._preempt_by_recompute(seq_group)
        return mode

    def _free_seq(self, seq: Any) -> None:
        """vLLM's `free_seq`; a sequence freed because it finished (not a recompute victim,
        which vLLM frees as WAITING) is noted with its output length, for the step's
        `seq_finished` (what a re-run needs: engine.analysis.rerun)."""
        with _OWN["free_seq"]:
            if seq.is_finished():
                self.current.finished_seqs.append((seq.seq_id, seq.get_output_len()))
        return self._originals["free_seq"](seq)

    # ----------------------------------------------------------------- committed demand
    def demand(self) -> Demand:
        """The worst-case blocks of every admitted group (running, swapped, or preempted by
        recompute and waiting to come back), as engine.policy.Demand. Call it only when vLLM's
        queues are whole: between steps or at the start of `schedule()`."""
        with _OWN["schedule"]:
            scheduler = self.scheduler
            counter = _BlockCounter(scheduler)
            in_queues = set()
            blocks = largest = most_seqs = 0
            # the recompute fallback is reserve's (`_preempt`): under any other policy a victim
            # is swapped whatever its size, so the slack stays
            recomputable = counter.recomputes and self._policy.name == "reserve"
            for group in _chain(scheduler.running, scheduler.swapped):
                in_queues.add(group.request_id)
                group_blocks, seqs = counter.worst(group)
                blocks += group_blocks
                largest, most_seqs = max(largest, group_blocks), max(most_seqs, seqs)
            for rid, group in list(self._parked.items()):
                if rid in in_queues or group.is_finished():
                    del self._parked[rid]
                    continue
                group_blocks, seqs = counter.worst(group)
                blocks += group_blocks
                largest, most_seqs = max(largest, group_blocks), max(most_seqs, seqs)
            if recomputable and most_seqs <= 1:
                largest = most_seqs = 0  # any victim that does not fit is recomputed
            gpu_total = scheduler.cache_config.num_gpu_blocks or 0
            cpu_total = scheduler.cache_config.num_cpu_blocks or 0
            return Demand(blocks=blocks, capacity=gpu_total + cpu_total,
                          largest_group=largest, most_seqs=most_seqs,
                          recomputable=recomputable and most_seqs <= 1)

    def admissible(self, waiting: Any) -> int:
        """How many groups at the head of `waiting` `reserve` lets vLLM's prefill pass see.

        Only the first `max_num_seqs` are weighed: vLLM's pass can never admit more groups
        than that in one step (each has a sequence), so if they all fit the whole queue may be
        seen. That keeps a step's cost independent of the waiting queue (80,000 groups on the
        seed from 0.6.4)."""
        with _OWN["_schedule_prefills"]:
            capture = self.current
            demand = capture.demand if capture.demand is not None else self.demand()
            counter = _BlockCounter(self.scheduler)
            parked = self._parked
            cap = self.scheduler.scheduler_config.max_num_seqs

            def costs() -> Iterator[tuple[int, int]]:
                for group in islice(waiting, cap):
                    yield (0, 0) if group.request_id in parked else counter.worst(group)

            count = admissible(demand, costs())
            return len(waiting) if count >= cap else count

    def reserve_head(self, enable_chunking: bool, waiting: Any) -> int | None:
        """Under `reserve` in a chunked-prefill step: how many waiting groups vLLM may see
        (recorded as withheld when fewer than all); None when the policy is not `reserve`."""
        if not (enable_chunking and self._policy.name == "reserve" and waiting):
            return None
        count = self.admissible(waiting)
        if count < len(waiting):
            capture = self.current
            capture.withheld = True
            capture.held_back = len(waiting) - count
        return count


class _BlockCounter:
    """Worst-case KV blocks of one group on this scheduler's block manager.

    Every unfinished sequence grows to min(prompt + max_tokens, max_model_len) tokens. vLLM's
    v1 block manager (0.5's default) keeps the prompt's full blocks shared by the group's
    sequences, on the GPU and on the CPU alike (its swap maps shared blocks once); the v2
    manager (0.6's) swaps each sequence's block table on its own, so a swapped-out group holds
    one copy of the prompt per sequence, and so does the GPU once it is swapped back in. From
    0.6.4 an n>1 request is n single-sequence groups, each counted on its own.
    """

    def __init__(self, scheduler: Any) -> None:
        self.block_size = scheduler.cache_config.block_size
        self.max_model_len = scheduler.scheduler_config.max_model_len
        self.shares_prompt = type(scheduler.block_manager).__name__ == "BlockSpaceManagerV1"
        self.recomputes = True  # vLLM's `_preempt_by_recompute` takes any 1-sequence group

    def worst(self, group: Any) -> tuple[int, int]:
        """(worst-case blocks, sequences it can run at once) of `group`; (0, 0) if finished."""
        seqs = group.get_max_num_running_seqs()
        if seqs <= 0:
            return 0, 0
        prompt = group.get_seqs()[0].get_prompt_len()
        params = group.sampling_params
        max_tokens = getattr(params, "max_tokens", None)
        total = self.max_model_len if max_tokens is None else min(prompt + max_tokens,
                                                                  self.max_model_len)
        per_seq = -(-total // self.block_size)
        shared = prompt // self.block_size if self.shares_prompt else 0
        return shared + seqs * (per_seq - shared), seqs


def _chain(*queues: Iterable[Any]) -> Iterator[Any]:
    for queue in queues:
        yield from queue


def head_of(queue: deque, count: int) -> tuple[deque, deque]:
    """(the first `count` items, the rest) of `queue` as new deques, at C speed."""
    return deque(islice(queue, count)), deque(islice(queue, count, None))


def _unique(ids) -> list[str]:
    """Ids in first-seen order without repeats (n fanned-out groups name one request)."""
    return list(dict.fromkeys(ids))


def attach(scheduler: Any, policy: str | Policy = "off") -> SchedulerHook:
    """Instrument `scheduler` in place and return the handle that controls the policy."""
    hook = SchedulerHook(scheduler, parse_policy(policy))
    hook._install()
    return hook


# --------------------------------------------------------------------- state readers
def cpu_usage(scheduler: Any) -> float:
    total = scheduler.cache_config.num_cpu_blocks or 0
    if total <= 0:
        return 0.0
    return 1.0 - scheduler.block_manager.get_num_free_cpu_blocks() / total


def reset_scheduler(scheduler: Any) -> None:
    """What a V0 scheduler keeps from one workload to the next once every group finished:
    its preemption count (quoted by its warnings) and the prompt-delay clock, set as
    `Scheduler.__init__` sets them."""
    for name, value in (("num_cumulative_preemption", 0), ("prev_time", 0.0),
                        ("prev_prompt", False), ("last_prompt_latency", 0.0)):
        if hasattr(scheduler, name):
            setattr(scheduler, name, value)


def block_counts(scheduler: Any) -> tuple[int, int, int, int]:
    """(gpu_used, gpu_total, cpu_used, cpu_total), computed as vLLM's `_get_stats` does."""
    bm = scheduler.block_manager
    gpu_total = scheduler.cache_config.num_gpu_blocks or 0
    cpu_total = scheduler.cache_config.num_cpu_blocks or 0
    return (gpu_total - bm.get_num_free_gpu_blocks(), gpu_total,
            cpu_total - bm.get_num_free_cpu_blocks(), cpu_total)


def swap_block_count(outputs: Any) -> int:
    """KV blocks this step's SchedulerOutputs copies out to CPU plus those it copies back in
    (lists of (src, dst) pairs in every supported release)."""
    if outputs is None:
        return 0
    return len(outputs.blocks_to_swap_out) + len(outputs.blocks_to_swap_in)


def running_seqs(scheduler: Any) -> int:
    running = family().SequenceStatus.RUNNING
    return sum(g.num_seqs(running) for g in scheduler.running)


def abort_queue_sizes(scheduler: Any) -> tuple[int, int, int]:
    """(running, swapped, waiting) when `schedule()` raised part-way through a step."""
    return family().abort_queue_sizes(scheduler)


def scheduler_of(engine: Any) -> Any:
    """The engine's (first) scheduler."""
    return family().scheduler_of(engine)


def request_id(group: Any) -> str:
    """The request a sequence group belongs to (its parent, for a fanned-out group)."""
    return family().request_id(group)


def read_vllm_stats(engine: Any) -> Any:
    """vLLM's own `Stats` for the engine's current state (what `do_log_stats` would log)."""
    return engine._get_stats(scheduler_outputs=None)


def token_budget(scheduler: Any) -> int:
    return scheduler.scheduler_config.max_num_batched_tokens
