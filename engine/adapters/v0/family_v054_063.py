"""Adapter family v054_063: vLLM 0.5.4 to 0.6.3 (supported release: 0.6.3.post1, verl's).

What differs from v050 (the rest of the hooks read the same names):
- `_schedule_running/_swapped/_prefills` take `(budget, curr_loras, enable_chunking)`, edit
  `self.waiting/running/swapped` in place and return one outputs object. From 0.5.5 vLLM reuses
  and clears the running-pass object every step, so the hook copies ids at once.
- `schedule()` returns 3 items (the outputs are still the second).
- `engine.scheduler` is a list, one per virtual engine: the hooks use `[0]`.
- `SamplerOutput` lives in `vllm.model_executor.layers.sampler`; the executor base also
  requires `pin_lora` and four prompt-adapter methods; `best_of` may be None (then `n`).
- Async output processing is switched off for both backends (the sim executor does not honour
  its callback; on a GPU it would move each step's output processing into the next step, so a
  record and `exec_s` would mean something else than on the sim), and `device="cuda"` is given
  explicitly: `device="auto"` can fail without a GPU, and on a GPU host it says "cuda" anyway.
- The gpu executor is the one `LLMEngine._get_executor_cls` picks: `GPUExecutor` for one
  CUDA device. The platform is vLLM's own detection (`vllm.platforms.current_platform`).
An n>1 request is still one group of n sequences, swapped together.
"""

from __future__ import annotations

from typing import Any, Callable

from vllm.core.scheduler import SchedulerPrefillOutputs
from vllm.executor.executor_base import ExecutorBase  # noqa: F401  (sim executor's base)
from vllm.model_executor.layers.sampler import SamplerOutput  # noqa: F401
from vllm.sequence import (CompletionSequenceGroupOutput, ExecuteModelRequest,  # noqa: F401
                           Logprob, SequenceOutput, SequenceStatus)
from vllm.worker.cache_engine import CacheEngine

FANS_OUT = False


def engine_kwargs() -> dict[str, Any]:
    """EngineArgs this family adds for both backends (see the module docstring)."""
    return {"device": "cuda", "disable_async_output_proc": True}


def gpu_executor_class(config: Any) -> type:
    """The executor vLLM itself picks for `config` (`LLMEngine.from_engine_args` asks this)."""
    from vllm.engine.llm_engine import LLMEngine

    return LLMEngine._get_executor_cls(config)


def platform_class() -> str | None:
    """vLLM's platform class in effect (dotted path), as its own detection chose it."""
    import vllm.platforms

    cls = type(vllm.platforms.current_platform)
    return f"{cls.__module__}.{cls.__qualname__}"


def construct(engine_class: Any, config: Any, **kwargs: Any) -> Any:
    return engine_class(**config.to_dict(), **kwargs)


def scheduler_of(engine: Any) -> Any:
    return engine.scheduler[0]


def request_id(group: Any) -> str:
    return group.request_id


def cpu_block_bytes(cache_config: Any, model_config: Any, parallel_config: Any) -> int:
    return CacheEngine.get_cache_block_size(cache_config, model_config, parallel_config)


def _chunking(args: tuple, kwargs: dict) -> bool:
    """`enable_chunking` from a `_schedule_*(budget, curr_loras, enable_chunking, ...)` call."""
    if "enable_chunking" in kwargs:
        return bool(kwargs["enable_chunking"])
    return bool(args[2]) if len(args) > 2 else False


def wrappers(hook: Any, original: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    scheduler = hook.scheduler

    def running(*args: Any, **kwargs: Any):
        out = original["_schedule_running"](*args, **kwargs)
        hook.saw_running(out.swapped_out, out.preempted)
        return out

    def swapped(*args: Any, **kwargs: Any):
        out = original["_schedule_swapped"](*args, **kwargs)
        hook.saw_swapped(len(scheduler.swapped),
                         [s.seq_group for s in out.prefill_seq_groups + out.decode_seq_groups],
                         out.infeasible_seq_groups)
        return out

    def prefills(*args: Any, **kwargs: Any):
        if hook.withholds(_chunking(args, kwargs), len(scheduler.waiting)):
            return SchedulerPrefillOutputs.create_empty()
        return original["_schedule_prefills"](*args, **kwargs)

    return {"_schedule_running": running, "_schedule_swapped": swapped,
            "_schedule_prefills": prefills}


def abort_queue_sizes(scheduler: Any) -> tuple[int, int, int]:
    """(running, swapped, waiting) when `schedule()` raised part-way through a step.

    Here the running pass pops groups off `running` as it goes and the groups it swapped out
    earlier in the aborting step sit only in its outputs object, in no queue: this counts the
    queues as they are (swapped is then a lower bound; the CPU block count is exact).
    """
    return len(scheduler.running), len(scheduler.swapped), len(scheduler.waiting)
