"""A vLLM platform that names the CUDA device without loading it, for releases that detect a
platform and have no `EngineArgs.device` (0.10).

From 0.10.0 vLLM resolves `vllm.platforms.current_platform` once per process, on first use,
and on a machine without a GPU finds none ("Device string must not be empty"); its own
CudaPlatform cannot even be imported there (`vllm._C` needs libcuda). Two uses, each only in
the process that needs it (engine.adapters.v0.family_v064_0102.check_backend):

- a sim engine: only the configuration reads the platform (the sim executor never touches a
  device), so the sim installs this one before anything resolves vLLM's own;
- a gpu dry run on a machine where vLLM's detection found no device: the engine arguments are
  resolved on this stand-in, and the dry run names the platform vLLM detected and says so. A
  gpu engine itself always runs on vLLM's own detection (without CUDA it is never built).
"""

from __future__ import annotations

from typing import Any

_installed: Any = None
_detected: str | None = None  # the class vLLM's own detection chose, when the stand-in replaced it


def _platform_class() -> type:
    import torch
    from vllm.platforms.interface import DeviceCapability, UnspecifiedPlatform

    class SimPlatform(UnspecifiedPlatform):
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

    SimPlatform.__module__, SimPlatform.__qualname__ = __name__, "SimPlatform"
    return SimPlatform


def install() -> None:
    """Make this process's vLLM platform the sim's, unless a device platform is in place
    (vLLM has not resolved one yet, or found none)."""
    global _installed
    import importlib

    # the module object itself: `observatory exec` calls this while `vllm.platforms` is still
    # being imported, before `vllm` has the attribute
    platforms = importlib.import_module("vllm.platforms")
    current = platforms._current_platform
    if current is None or current.device_type == "":
        _installed = platforms._current_platform = _platform_class()()


def stand_in_for_config() -> str | None:
    """gpu without a device: resolve vLLM's own detection first; if it found no device, put
    this platform in its place for the configuration. Returns the detected class's dotted path
    when the stand-in replaced it, else None (a real device platform stays)."""
    global _detected
    import vllm.platforms

    detected = vllm.platforms.current_platform  # vLLM's own detection, resolved now
    if detected.device_type != "":
        return None
    cls = type(detected)
    _detected = f"{cls.__module__}.{cls.__qualname__}"
    install()
    return _detected


def installed() -> bool:
    """Whether this process runs vLLM on this platform."""
    return _installed is not None


def detected() -> str | None:
    """The platform vLLM detected, when the stand-in replaced it (gpu dry run without CUDA)."""
    return _detected
