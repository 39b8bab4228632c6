"""Adapter family v064_0102: vLLM 0.6.4 to 0.10.2, the last V0 releases (supported: 0.7.3,
0.10.2). The scheduler passes are called as in v054_063 (their wrappers are reused; 0.7.3's
extra `partial_prefill_metadata` passes through). What differs:

- Construction is `LLMEngine(vllm_config=..., executor_class=...)`.
- An n>1 request fans out into n single-sequence groups (`ParallelSampleSequenceGroup`) whose
  request ids are `<parent>_parallel_sample_<i>`. Every group then has one sequence, so vLLM's default preemption would recompute and the bug
  needs `preemption_mode="swap"` (the presets set it). Records name the parent request.
- From 0.7.0 an executor implements `_init_executor`, `collective_rpc` and `check_health`; in
  0.10.2 `shutdown()` calls `collective_rpc`.
- From 0.8 V0 needs `VLLM_USE_V1=0` before the engine is built; from 0.10.0
  `EngineArgs.device` is gone and vLLM detects its platform: the sim then needs its own
  (engine.adapters.v0.sim_platform), chosen by `check_backend` before vLLM resolves one.
- The single-GPU executor is `UniProcExecutor` (there is no `vllm.executor.gpu_executor`).
"""

from __future__ import annotations

import os

os.environ["VLLM_USE_V1"] = "0"  # read lazily by vllm.envs, so before the engine is enough

from typing import Any  # noqa: E402

import vllm  # noqa: E402
import vllm.platforms  # noqa: E402

from engine.adapters.v0 import sim_platform  # noqa: E402
from engine.adapters.versions import process_backend  # noqa: E402
from engine.errors import EngineError  # noqa: E402

_HAS_DEVICE = tuple(int(p) for p in vllm.__version__.split(".")[:2]) < (0, 10)


def check_backend(backend: str | None) -> None:
    """Choose vLLM's platform for this process's `backend`, before vLLM resolves its own.

    Up to 0.9, `EngineArgs.device="cuda"` (engine_kwargs) resolves the config without any
    platform, so both backends keep vLLM's own detection. From 0.10 there is no `device`: the
    sim installs its platform (engine.adapters.v0.sim_platform); gpu keeps vLLM's detection,
    and only where that found no device (no gpu engine can be built here: a dry run) are the
    engine arguments resolved on the sim's platform, which the dry run says. A process that
    ran a sim engine can no longer give a gpu engine vLLM's detection."""
    if _HAS_DEVICE or backend is None:
        return
    if backend == "sim":
        sim_platform.install()
        return
    if sim_platform.installed() and sim_platform.detected() is None:
        raise EngineError("this process runs vLLM on the sim platform; a gpu engine needs a "
                          "process of its own")
    sim_platform.stand_in_for_config()


check_backend(process_backend())  # before the imports below resolve vLLM's platform
from vllm.core.scheduler import SchedulerPrefillOutputs  # noqa: E402,F401
from vllm.executor.executor_base import ExecutorBase  # noqa: E402,F401
from vllm.model_executor.layers.sampler import SamplerOutput  # noqa: E402,F401
from vllm.sequence import (CompletionSequenceGroupOutput, ExecuteModelRequest,  # noqa: E402,F401
                           Logprob, SequenceOutput, SequenceStatus)
from vllm.worker.cache_engine import CacheEngine  # noqa: E402

from engine.adapters.v0.family_v054_063 import abort_queue_sizes, wrappers  # noqa: E402,F401

FANS_OUT = True


def engine_kwargs() -> dict[str, Any]:
    """EngineArgs this family adds for both backends: async output processing off (as in
    v054_063: the records of a gpu step and a sim step mean the same thing), and up to 0.9
    `device="cuda"`."""
    kwargs: dict[str, Any] = {"disable_async_output_proc": True}
    if _HAS_DEVICE:
        kwargs["device"] = "cuda"
    return kwargs


def gpu_executor_class(config: Any) -> type:
    """The executor vLLM itself picks for `config`: `LLMEngine._get_executor_cls`, which for
    one device (`distributed_executor_backend="uni"`) is `UniProcExecutor`."""
    from vllm.engine.llm_engine import LLMEngine

    return LLMEngine._get_executor_cls(config)


def platform_class() -> str | None:
    """The platform class vLLM's own detection chose (dotted path): the sim's for a sim
    engine on 0.10, and never a stand-in for gpu (engine.adapters.v0.sim_platform)."""
    import vllm.platforms

    if sim_platform.detected() is not None:
        return sim_platform.detected()
    cls = type(vllm.platforms.current_platform)
    return f"{cls.__module__}.{cls.__qualname__}"


def platform_notes() -> list[str]:
    """What a dry run must say about the platform the engine arguments were resolved on."""
    if sim_platform.detected() is None:
        return []
    return ["vLLM's own CUDA platform cannot load without libcuda, so the engine arguments "
            "were resolved on a stand-in that only names the CUDA device "
            "(engine.adapters.v0.sim_platform); on a CUDA host vLLM detects "
            "vllm.platforms.cuda.CudaPlatform"]


def construct(engine_class: Any, config: Any, **kwargs: Any) -> Any:
    return engine_class(vllm_config=config, **kwargs)


def scheduler_of(engine: Any) -> Any:
    return engine.scheduler[0]


_PARENT_SEP = "_parallel_sample_"


def request_id(group: Any) -> str:
    """The parent request of a fanned-out group (vLLM names children
    `<parent>_parallel_sample_<i>`); a group that did not fan out is its own request."""
    rid = group.request_id
    parent, sep, _ = rid.rpartition(_PARENT_SEP)
    return parent if sep else rid


def cpu_block_bytes(cache_config: Any, model_config: Any, parallel_config: Any) -> int:
    return CacheEngine.get_cache_block_size(cache_config, model_config, parallel_config)
