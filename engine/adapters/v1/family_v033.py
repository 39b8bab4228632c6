"""vLLM 0.33's V1 API family: every private name the V1 hooks, step reader and builder use.

Kept in one small module so a release that renames them changes one file. What is read:
- the Scheduler: `requests`, `running`, `waiting`, `kv_cache_manager` (its `block_pool`),
  `kv_holding_waiting` (with `waiting`, its queues of waiting requests),
  `scheduler_reserve_full_isl` (cached from SchedulerConfig at start, read at each admission:
  the `full-isl` policy switches it live), `_inflight_prefill_reserved_blocks()` (the blocks
  the prefills in flight still need to finish, vLLM's own arithmetic), `max_num_scheduled_tokens`,
  and the wrapped methods `schedule`, `_preempt_request` and `kv_cache_manager.allocate_slots`
  (its `full_sequence_must_fit` and `reserved_blocks` arguments), and, under
  `skip-and-continue`, `_handle_blocked_waiting_request`;
- a Request: `request_id`, `status`, `num_computed_tokens`, `num_tokens` (prompt plus outputs),
  `num_output_tokens`, `num_preemptions`;
- a SchedulerOutput: `num_scheduled_tokens`, `total_num_scheduled_tokens`, `scheduled_new_reqs`
  (`req_id`, `prompt_token_ids`, `num_computed_tokens`), `scheduled_cached_reqs` (`req_ids`,
  `resumed_req_ids`, `num_computed_tokens`, `num_output_tokens`), `finished_req_ids`;
- the engine: `LLMEngine.engine_core` (the InprocClient) `.engine_core` (the EngineCore);
- what the sim executor answers: `ModelRunnerOutput(req_ids, req_id_to_index,
  sampled_token_ids)`.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Callable

from engine.spec import RunSpec

_ADMITTING: tuple = ()  # (WAITING, PREEMPTED), on first use: importing vLLM's request module
# resolves vLLM's platform on some releases (0.18), which a sim engine must choose first

TIER = "tier_v033"  # the offloading connector's names (engine.adapters.v1.current.tier)

NATIVE_FULL_ISL = True
"""vLLM's own `scheduler_reserve_full_isl` enforces `full-isl`: the hook only switches it."""


# ---- building ---------------------------------------------------------------------------------
def engine_kwargs(spec: RunSpec) -> dict[str, Any]:
    return {"scheduler_reserve_full_isl": spec.scheduler_reserve_full_isl}


def configure(scheduler: Any, spec: RunSpec) -> None:
    """The spec's settings EngineArgs cannot carry: none on 0.33."""


def full_isl_setting(config: Any, spec: RunSpec) -> bool:
    """The full-ISL option a run starts with, from `config` (EngineArgs or SchedulerConfig)."""
    return bool(config.scheduler_reserve_full_isl)


def compile_result() -> Any:
    """What a worker's `compile_or_warm_up_model` returns: nothing compiled."""
    from vllm.v1.worker.worker_base import CompilationTimes

    return CompilationTimes(language_model=0.0, encoder=0.0)


def full_isl_fits(scheduler: Any, request: Any, args: tuple, kwargs: dict[str, Any]) -> bool:
    """Never asked on 0.33 (NATIVE_FULL_ISL): vLLM's own allocate_slots checks it."""
    raise NotImplementedError("0.33 enforces full-isl itself")


PLATFORM_FROM_ENV = True
"""vLLM picks its CPU platform from VLLM_TARGET_DEVICE=cpu in any process (`vllm serve` given
the sim executor by hand too), not only where the observatory runs first."""


def install_sim_platform() -> None:
    """Nothing: 0.33 picks its CPU platform from VLLM_TARGET_DEVICE=cpu (SIM_ENV)."""


HAS_ASYNC_SIM = True
"""The sim runs vLLM's async scheduling (`--async-scheduling`): the engine core's
`step_with_batch_queue` calls `execute_model(non_block=True)` then `sample_tokens(grammar,
non_block=True)`, which the sim executor answers (engine.adapters.v1.sim_executor)."""


def construct(args: Any) -> Any:
    from vllm.v1.engine.llm_engine import LLMEngine

    if not getattr(args, "async_scheduling", False):
        return LLMEngine.from_engine_args(args)
    with _platform_keeps_async_scheduling():
        return LLMEngine.from_engine_args(args)


class _platform_keeps_async_scheduling:
    """While vLLM builds its config: its platform's `check_and_update_config` as it is, but
    async scheduling left on when the run asked for it. vLLM's CPU platform (and the sim's,
    from 0.34) turn it off because a CPU model runner does not need the overlap; the sim runs
    no model runner, and the run asked for vLLM's AsyncScheduler and batch queue. vLLM's own
    check of the executor (`supports_async_scheduling`) and the rest of the platform's
    configuration still run. Wrapped on the platform instance (as the hooks wrap the
    scheduler's), and taken off again once the engine is built."""

    def __enter__(self) -> None:
        from vllm.platforms import current_platform

        original = current_platform.check_and_update_config

        def check_and_update_config(vllm_config: Any) -> None:
            asked = vllm_config.scheduler_config.async_scheduling
            original(vllm_config)
            if asked:
                vllm_config.scheduler_config.async_scheduling = True

        self.platform = current_platform
        vars(current_platform)["check_and_update_config"] = check_and_update_config

    def __exit__(self, *exc: Any) -> None:
        vars(self.platform).pop("check_and_update_config", None)


def engine_core_of(engine: Any) -> Any:
    return engine.engine_core.engine_core


def vllm_config_of(engine: Any) -> Any:
    return engine.vllm_config


def scheduler_of(engine_core: Any) -> Any:
    return engine_core.scheduler


def executor_of(engine_core: Any) -> Any:
    return engine_core.model_executor


# ---- the scheduler ----------------------------------------------------------------------------
def reserve_full_isl(scheduler: Any) -> bool:
    return bool(scheduler.scheduler_reserve_full_isl)


def set_reserve_full_isl(scheduler: Any, value: bool) -> None:
    scheduler.scheduler_reserve_full_isl = value


def block_size(scheduler: Any) -> int:
    return scheduler.block_size


def running(scheduler: Any) -> list:
    return scheduler.running


def waiting_count(scheduler: Any) -> int:
    """Every request waiting to be scheduled, in every queue the release keeps them in. 0.33
    has two: `waiting`, and `kv_holding_waiting` (requests that already hold KV blocks: an
    async KV load in flight or landed, a paused streaming session), drained before `waiting`.
    Its `deferred_waiting` (skipped by the scan, or blocked on a load or a grammar) is a set of
    requests still in one of the two queues, so it adds none. The same sum as
    vLLM's own `get_request_counts()`; a stall confined to the block-holding queue counted
    only `waiting` and was never flagged."""
    return len(scheduler.waiting) + len(scheduler.kv_holding_waiting)


def waiting_by_reason(scheduler: Any) -> dict[str, int]:
    """vLLM's own `num_requests_waiting_by_reason`: `capacity` and `deferred`, the
    `num_waiting_reqs` and `num_skipped_waiting_reqs` its `make_stats()` reports, by the same
    expressions (make_stats itself is not called: it drains the prefix-cache and eviction
    stats vLLM's loggers read). 0.33 counts every queue (`get_request_counts()`), less the
    requests in `deferred_waiting` (skipped by the scan, or blocked on a load or a grammar)."""
    _, waiting = scheduler.get_request_counts()
    deferred = len(scheduler.deferred_waiting)
    return {"capacity": waiting - deferred, "deferred": deferred}


def head_waiting(scheduler: Any) -> Any:
    """The waiting request vLLM's scan takes first next step, or None: 0.33 drains
    `kv_holding_waiting` before `waiting` (its pause states aside), each by its own
    `peek_request()` (the policy's order)."""
    queue = scheduler.kv_holding_waiting or scheduler.waiting
    return queue.peek_request() if queue else None


def seats(scheduler: Any) -> tuple[str, int, int]:
    """(the limit's name, seats taken, the limit) as 0.33's scan checks them before it looks
    at a waiting request: running requests plus paused streaming sessions against
    `max_num_active_reqs` (`max_num_active_seqs`, else `max_num_seqs`)."""
    taken = len(scheduler.running) + scheduler.num_waiting_for_streaming_input
    limit = scheduler.max_num_active_reqs
    name = ("max_num_seqs" if limit == scheduler.max_num_running_reqs
            else "max_num_active_seqs")
    return name, taken, limit


_BLOCKED: dict = {}  # RequestStatus -> reason, on first use (see _ADMITTING)


def blocked_reason(request: Any) -> str:
    """The reason a waiting request's status says it cannot be scheduled yet ("" if none):
    the statuses vLLM's `_handle_blocked_waiting_request` skips."""
    if not _BLOCKED:
        from vllm.v1.request import RequestStatus

        # the names differ by release (0.18: WAITING_FOR_FSM; later: ..._GRAMMAR)
        for name, reason in (("WAITING_FOR_REMOTE_KVS", "kv_load"), ("WAITING_FOR_FSM", "grammar"),
                             ("WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR", "grammar"),
                             ("WAITING_FOR_STREAMING_REQ", "streaming")):
            status = getattr(RequestStatus, name, None)
            if status is not None:
                _BLOCKED[status] = reason
    return _BLOCKED.get(request.status, "")


HAS_SCAN_SKIP = True
"""vLLM's waiting scan asks `_handle_blocked_waiting_request(request)` of each request it looks
at, and passes by (defers to a later step) one it answers False for, as it does a request
whose KV load has not landed: the way in of the `skip-and-continue` policy."""


def install_scan_skip(scheduler: Any, skip: Callable[[Any], bool]) -> None:
    """Have vLLM's waiting scan pass by every request `skip` says to, by its own skip path;
    vLLM's `_handle_blocked_waiting_request` still decides for the others."""
    original = scheduler._handle_blocked_waiting_request

    def ready(request: Any) -> bool:
        return False if skip(request) else original(request)

    scheduler._handle_blocked_waiting_request = ready


def remove_scan_skip(scheduler: Any) -> None:
    vars(scheduler).pop("_handle_blocked_waiting_request", None)


# ---- per-iteration-count (vLLM #45257, PR #45339's rule) ------------------------------------
def is_async(scheduler: Any) -> bool:
    """The scheduler runs vLLM's async scheduling (its AsyncScheduler, output placeholders)."""
    return bool(scheduler.scheduler_config.async_scheduling)


def runs_sim(scheduler: Any) -> bool:
    """The engine's executor is the sim's (it computes nothing, so it holds no batch of
    `max_num_seqs` slots that more running requests could overflow)."""
    from engine.adapters.v1.sim_executor import DOTTED_PATH

    return scheduler.parallel_config.distributed_executor_backend == DOTTED_PATH


def finals_in_flight(scheduler: Any) -> int:
    """Running requests vLLM's running loop will pass by this step because the step in flight
    already reaches their max_tokens: 0.33's own condition (its `num_output_placeholders`
    check, word for word), read before `schedule()` runs. Each still counts against
    `max_num_seqs` in the waiting loop (#45257). Always 0 without async scheduling."""
    count = 0
    for request in scheduler.running:
        placeholders = request.num_output_placeholders
        if (placeholders > 0 and request.num_computed_tokens + 2 - placeholders
                >= request.num_prompt_tokens + request.max_tokens):
            count += 1
    return count


def widen_seats(scheduler: Any, extra: int) -> tuple[int, int]:
    """Raise the seat limits vLLM's scan and its final check read (`max_num_active_reqs`,
    `max_num_running_reqs`) by `extra`; return them as they were, for `set_seats`."""
    saved = (scheduler.max_num_running_reqs, scheduler.max_num_active_reqs)
    scheduler.max_num_running_reqs = saved[0] + extra
    scheduler.max_num_active_reqs = saved[1] + extra
    return saved


def set_seats(scheduler: Any, saved: tuple[int, int]) -> None:
    scheduler.max_num_running_reqs, scheduler.max_num_active_reqs = saved


_ALLOCATE_PARAMS = ("num_new_computed_tokens", "new_computed_blocks", "num_lookahead_tokens",
                    "num_external_computed_tokens", "delay_cache_blocks", "num_encoder_tokens",
                    "full_sequence_must_fit", "reserved_blocks")
"""`KVCacheManager.allocate_slots` parameters after (request, num_new_tokens), in order: the
same from 0.18 (which stops at num_encoder_tokens) to 0.34."""


def refused_blocks(scheduler: Any, request: Any, num_new_tokens: int, args: tuple,
                   kwargs: dict[str, Any],
                   reach: Callable[[Any, Any, int], int] | None = None) -> tuple[int, int]:
    """(blocks needed, blocks free to it) of an `allocate_slots` call vLLM refused: the
    blocks `request` must get to hold what the call asked for (its computed tokens, the new
    hits, the new tokens and lookahead; its whole context when vLLM's
    `full_sequence_must_fit` was set), by vLLM's own arithmetic with prefix hits counted as
    needing blocks, and the pool's free blocks less what the call reserved for others.
    `reach`: the family's `blocks_to_reach` (0.33's by default)."""
    given = dict(zip(_ALLOCATE_PARAMS, args))
    given.update(kwargs)
    tokens = (request.num_computed_tokens + given.get("num_new_computed_tokens", 0)
              + given.get("num_external_computed_tokens", 0) + num_new_tokens
              + given.get("num_lookahead_tokens", 0))
    if given.get("full_sequence_must_fit"):
        tokens = max(tokens, request.num_tokens)
    need = (reach or blocks_to_reach)(scheduler, request, tokens)
    return need, max(0, free_blocks(scheduler) - given.get("reserved_blocks", 0))


def requests(scheduler: Any) -> dict[str, Any]:
    return scheduler.requests


def kv_cache_manager(scheduler: Any) -> Any:
    return scheduler.kv_cache_manager


def free_blocks(scheduler: Any) -> int:
    return scheduler.kv_cache_manager.block_pool.get_num_free_blocks()


def total_blocks(scheduler: Any) -> int:
    """Usable blocks: the pool less vLLM's null block."""
    return scheduler.kv_cache_manager.block_pool.num_gpu_blocks - 1


def inflight_reserved_blocks(scheduler: Any, besides: Any = None) -> int:
    """The blocks the prefills in flight still need to finish (vLLM's own reservation, as
    `_inflight_prefill_reserved_blocks()` sums it), less `besides`'s own: a request whose
    async KV load has landed is still in flight there, and its need is counted apart."""
    return sum(scheduler._request_remaining_blocks(req)
               for req in scheduler._inflight_prefills if req is not besides)


def blocks_needed(scheduler: Any, request: Any, num_tokens: int, **release_args: Any) -> int:
    """vLLM's `coordinator.get_num_blocks_to_allocate` for `request` holding `num_tokens`
    tokens, with no new prefix hits: the arguments every V1 release since 0.18 takes, and
    `release_args`, those a release added (each family's `blocks_to_reach` passes its own)."""
    manager = scheduler.kv_cache_manager
    return manager.coordinator.get_num_blocks_to_allocate(
        request_id=request.request_id,
        num_tokens=num_tokens,
        new_computed_blocks=manager.empty_kv_cache_blocks.blocks,
        num_encoder_tokens=0,
        total_computed_tokens=request.num_computed_tokens,
        **release_args,
    )


def blocks_to_reach(scheduler: Any, request: Any, num_tokens: int) -> int:
    """Blocks `request` must still get to hold `num_tokens` tokens, by vLLM's own arithmetic
    (as the scheduler's `_request_remaining_blocks` counts them; prefix hits not counted)."""
    return blocks_needed(scheduler, request, num_tokens,
                         num_local_computed_tokens=request.num_computed_tokens,
                         num_tokens_main_model=num_tokens,
                         apply_admission_cap=True,
                         prefill_end=max(request.num_prompt_tokens, request.num_tokens - 1))


def token_budget(scheduler: Any) -> int:
    return scheduler.max_num_scheduled_tokens


# ---- a request --------------------------------------------------------------------------------
def request_id(request: Any) -> str:
    return request.request_id


def is_admitting(request: Any) -> bool:
    """Waiting for its first admission or to resume after a preemption."""
    return request.status in (_ADMITTING or _admitting())


def _admitting() -> tuple:
    global _ADMITTING
    from vllm.v1.request import RequestStatus

    _ADMITTING = (RequestStatus.WAITING, RequestStatus.PREEMPTED)
    return _ADMITTING


def computed_tokens(request: Any) -> int:
    return request.num_computed_tokens


request_progress: Callable[[Any], tuple[int, int, int]] = attrgetter(
    "num_computed_tokens", "num_tokens", "num_output_tokens")
"""A request's (computed tokens, context tokens: prompt plus outputs, output tokens), in one C
call: the hooks read it for every scheduled request of every step."""


def computed_tokens_sum(requests: list) -> int:
    """The computed tokens of `requests` together (the KV they hold), summed in C."""
    return sum(map(_COMPUTED, requests))


_COMPUTED = attrgetter("num_computed_tokens")


def context_tokens(request: Any) -> int:
    return request.num_tokens


def output_tokens(request: Any) -> int:
    return request.num_output_tokens


def preemptions(request: Any) -> int:
    return request.num_preemptions


# ---- a SchedulerOutput ------------------------------------------------------------------------
def scheduled_tokens(output: Any) -> dict[str, int]:
    return output.num_scheduled_tokens


def total_scheduled_tokens(output: Any) -> int:
    return output.total_num_scheduled_tokens


def finished_ids(output: Any) -> set[str]:
    return output.finished_req_ids


def admissions(output: Any, requests: dict[str, Any]) -> tuple[list[str], set[str]]:
    """The requests the step admitted: those admitted for the first time (in vLLM's order)
    and those resumed after a preemption. Read as `schedule()` returns, while `requests` (the
    scheduler's) still holds every request it scheduled. 0.33 sends a resumed request among
    the cached ones and lists it in `resumed_req_ids`."""
    new = output.scheduled_new_reqs
    return ([n.req_id for n in new] if new else []), output.scheduled_cached_reqs.resumed_req_ids


def admitted_cached_tokens(output: Any, resumed_ids: set[str]) -> tuple[int, int]:
    """Tokens the requests admitted this step found already computed (the prefix cache), at
    every admission and at first admissions only (engine.conventions): new requests' and
    resumed requests' computed tokens at admission, then the new requests' alone. 0.33 sends
    only first admissions in `scheduled_new_reqs`; `resumed_ids` is not needed here."""
    first = sum(new.num_computed_tokens for new in output.scheduled_new_reqs)
    hits = first
    cached = output.scheduled_cached_reqs
    if cached.resumed_req_ids:
        hits += sum(n for rid, n in zip(cached.req_ids, cached.num_computed_tokens)
                    if rid in cached.resumed_req_ids)
    return hits, first


# ---- the sim executor's side of a step ------------------------------------------------------
def new_request_lengths(new: Any) -> tuple[int, int]:
    """(prompt tokens, output tokens so far) of a request in `scheduled_new_reqs`: 0.33 sends
    only first admissions there, with no output yet."""
    return len(new.prompt_token_ids), 0


def model_runner_output(req_ids: list[str], sampled: list[list[int]]) -> Any:
    """The ModelRunnerOutput of a step that sampled `sampled[i]` for `req_ids[i]`."""
    from vllm.v1.outputs import ModelRunnerOutput  # at use: see _ADMITTING

    return ModelRunnerOutput(req_ids=req_ids,
                             req_id_to_index={rid: i for i, rid in enumerate(req_ids)},
                             sampled_token_ids=sampled)
