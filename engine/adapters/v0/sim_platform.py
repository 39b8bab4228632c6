"""The sim backend's vLLM platform for releases that detect one and have no `EngineArgs.device`
(0.10): a CUDA platform whose device queries answer without a device.

From 0.10.0 vLLM resolves `vllm.platforms.current_platform` once per process, on first use,
and on a machine without a GPU finds none ("Device string must not be empty"). Only the
configuration reads it for the sim (the sim executor never touches a device), so the sim
installs this one before anything resolves the platform. It is installed only for a sim
engine, only in the process that runs it (engine.adapters.versions.family("sim")): a gpu
engine always gets vLLM's own detection.
"""

from __future__ import annotations

from typing import Any

_installed: Any = None


def install() -> None:
    """Make this process's vLLM platform the sim's, unless a device platform is in place."""
    global _installed
    import torch
    import vllm.platforms
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
        _installed = vllm.platforms._current_platform = SimPlatform()


def installed() -> bool:
    """Whether this process runs vLLM on the sim platform."""
    return _installed is not None
