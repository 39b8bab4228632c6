"""Adapter family v050: vLLM 0.5.0.post1 (the API of 0.5.0 to 0.5.3).

- `_schedule_running/_swapped/_prefills` take the queue (and a policy) and return
  `(remaining_queue, outputs)`; the scheduler replaces its queues with the remaining ones at the
  end of `_schedule_*`.
- `engine.scheduler` is one Scheduler; `LLMEngine(**config.to_dict(), executor_class=...)`.
- `SamplerOutput` lives in `vllm.sequence`; an n>1 request is one group of n sequences.
- There is no `vllm.platforms` yet: `DeviceConfig("auto")` says "cuda" unless vLLM was built
  for another device, and `LLMEngine.from_engine_args` picks the executor inline (no
  `_get_executor_cls`): one CUDA device without a distributed backend is `GPUExecutor`.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

from vllm.core.scheduler import SchedulerPrefillOutputs
from vllm.executor.executor_base import ExecutorBase  # noqa: F401  (sim executor's base)
from vllm.sequence import (CompletionSequenceGroupOutput, ExecuteModelRequest,  # noqa: F401
                           Logprob, SamplerOutput, SequenceOutput, SequenceStatus)
from vllm.worker.cache_engine import CacheEngine

from engine.errors import EngineError

FANS_OUT = False


def engine_kwargs() -> dict[str, Any]:
    """EngineArgs this family adds for both backends (none: 0.5 has no async output)."""
    return {}


def gpu_executor_class(config: Any) -> type:
    """The executor `LLMEngine.from_engine_args` picks for `config` in 0.5.0: its last branch,
    `GPUExecutor`, for a CUDA device without a distributed backend (what the observatory
    builds: one GPU). Anything else would be another branch, which the observatory does not
    run."""
    device = config.device_config.device_type
    backend = config.parallel_config.distributed_executor_backend
    if device != "cuda" or backend in ("ray", "mp"):
        raise EngineError(f"the gpu backend runs one CUDA device; vLLM resolved device "
                          f"{device!r}, executor backend {backend!r}")
    from vllm.executor.gpu_executor import GPUExecutor

    return GPUExecutor


def platform_class() -> str | None:
    """vLLM's platform class in effect (dotted path); None: this release has none."""
    return None


def construct(engine_class: Any, config: Any, **kwargs: Any) -> Any:
    return engine_class(**config.to_dict(), **kwargs)


def scheduler_of(engine: Any) -> Any:
    return engine.scheduler


def request_id(group: Any) -> str:
    return group.request_id


def cpu_block_bytes(cache_config: Any, model_config: Any, parallel_config: Any) -> int:
    return CacheEngine.get_cache_block_size(cache_config, model_config, parallel_config)


def wrappers(hook: Any, original: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """The three pass wrappers; `hook` records what they saw (SchedulerHook.saw_*)."""

    def running(*args: Any, **kwargs: Any):
        remaining, out = original["_schedule_running"](*args, **kwargs)
        hook.saw_running(out.swapped_out, out.preempted)
        return remaining, out

    def swapped(*args: Any, **kwargs: Any):
        remaining, out = original["_schedule_swapped"](*args, **kwargs)
        hook.saw_swapped(len(remaining),
                         [s.seq_group for s in out.prefill_seq_groups + out.decode_seq_groups],
                         out.infeasible_seq_groups)
        return remaining, out

    def prefills(waiting_queue: deque, budget: Any, curr_loras: Any,
                 enable_chunking: bool = False):
        if hook.withholds(enable_chunking, len(waiting_queue)):
            return waiting_queue, SchedulerPrefillOutputs.create_empty()
        return original["_schedule_prefills"](waiting_queue, budget, curr_loras,
                                              enable_chunking=enable_chunking)

    return {"_schedule_running": running, "_schedule_swapped": swapped,
            "_schedule_prefills": prefills}


def abort_queue_sizes(scheduler: Any) -> tuple[int, int, int]:
    """(running, swapped, waiting) when `schedule()` raised part-way through a step.

    vLLM updates its queues only at the end of `_schedule_*`, so groups swapped out earlier in
    the aborting step still sit in `running` with SWAPPED sequences; count them as swapped.
    """
    swapped_status = SequenceStatus.SWAPPED
    moved = sum(1 for g in scheduler.running if g.num_seqs(swapped_status) > 0)
    return (len(scheduler.running) - moved, len(scheduler.swapped) + moved,
            len(scheduler.waiting))
