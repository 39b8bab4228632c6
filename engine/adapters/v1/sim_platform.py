"""The V1 sim's vLLM platform from 0.34: vLLM's CPU platform without its model runner's needs.

From 0.34, `CpuPlatform.check_and_update_config` refuses to configure any engine on an x86
machine without triton-cpu ("vLLM on x86 CPUs requires Triton (triton-cpu)"): its model runner
compiles Triton kernels for the CPU. The sim runs no model runner (its executor computes
nothing), so it needs none of that, and vLLM takes a platform it does not know through its
plugin system: engine.adapters.v1.platform.vllm_platform_plugin names this class in a sim's
processes, and vLLM imports it while it resolves its platform (so this module imports nothing of
vLLM but the platform it extends).

Everything the configuration reads of a platform (the CPU device, its memory, pinning, the
serving defaults of a CPU) is vLLM's CPU platform's. Of its `check_and_update_config` the sim
keeps what shapes the scheduling: async scheduling off, as vLLM's CPU platform sets it (and as
the sim of 0.33, which ran on that platform, had it); and no CUDA graph capture sizes, which a
CPU does not capture. The rest of it configures kernels, compilation and workers that a sim
engine never builds.
"""

from __future__ import annotations

from typing import Any

from vllm.platforms.cpu import CpuPlatform


class SimCpuPlatform(CpuPlatform):
    """vLLM's CPU platform for an engine whose executor runs no model."""

    @classmethod
    def check_and_update_config(cls, vllm_config: Any) -> None:
        vllm_config.scheduler_config.async_scheduling = False
        vllm_config.compilation_config.cudagraph_capture_sizes = []
