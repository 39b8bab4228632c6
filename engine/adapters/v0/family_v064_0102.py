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
  `EngineArgs.device` is gone.
"""

from __future__ import annotations

import os

os.environ["VLLM_USE_V1"] = "0"  # read lazily by vllm.envs, so before the engine is enough

from typing import Any  # noqa: E402

import vllm  # noqa: E402
import vllm.platforms  # noqa: E402

_HAS_DEVICE = tuple(int(p) for p in vllm.__version__.split(".")[:2]) < (0, 10)


def _sim_platform() -> None:
    """From 0.10.0 `EngineArgs.device` is gone and vLLM detects its platform; on a machine
    without a GPU it finds none ("Device string must not be empty"). Install a CUDA platform
    whose device queries answer without a device, before anything resolves the platform. Only
    configuration reads it: the sim executor never touches a device."""
    import torch
    from vllm.platforms.interface import DeviceCapability, UnspecifiedPlatform

    class SimPlatform(UnspecifiedPlatform):
        # vLLM's CudaPlatform imports vllm._C, which needs libcuda: this names the device
        # without loading it.
        device_name = "cuda"
        device_type = "cuda"
        dispatch_key = "CUDA"

        @property
        def supported_dtypes(self) -> list:
            return [torch.float16, torch.bfloat16, torch.float32]

        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:
            return DeviceCapability(major=8, minor=0)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return "sim"

        @classmethod
        def is_async_output_supported(cls, enforce_eager: bool | None) -> bool:
            return False

    current = vllm.platforms._current_platform
    if current is None or current.device_type == "":
        vllm.platforms._current_platform = SimPlatform()


if not _HAS_DEVICE:
    _sim_platform()
from vllm.core.scheduler import PreemptionMode, SchedulerPrefillOutputs  # noqa: E402,F401
from vllm.executor.executor_base import ExecutorBase  # noqa: E402,F401
from vllm.model_executor.layers.sampler import SamplerOutput  # noqa: E402,F401
from vllm.sequence import (CompletionSequenceGroupOutput, ExecuteModelRequest,  # noqa: E402,F401
                           Logprob, SequenceOutput, SequenceStatus)
from vllm.worker.cache_engine import CacheEngine  # noqa: E402

from engine.adapters.v0.family_v054_063 import abort_queue_sizes, wrappers  # noqa: E402,F401

FANS_OUT = True


def engine_kwargs() -> dict[str, Any]:
    kwargs: dict[str, Any] = {"disable_async_output_proc": True}
    if _HAS_DEVICE:
        kwargs["device"] = "cuda"
    return kwargs


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
