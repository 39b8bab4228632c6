"""`num_cpu_blocks` on the gpu backend: the swap space vLLM derives exactly that count from.

The sim executor reports CPU blocks itself, so the sim takes `num_cpu_blocks` as is. vLLM's GPU
worker instead derives them from the swap space:

    num_cpu_blocks = int(cache_config.swap_space_bytes // <the release's cache block size>)
    swap_space_bytes = swap_space_gib * (1 << 30)            (CacheConfig, a float)

So a block count becomes a swap space here, with vLLM's own block-size function, and the engine
is then configured with that swap space: the demo preset's 512 CPU blocks give 512 CPU blocks on
a GPU too. The swap space is put half a block above N blocks, so float rounding of the GiB value
can never floor to N - 1 (or reach N + 1). `check_cpu_blocks` repeats vLLM's arithmetic on the
final config, and the result (blocks asked, GiB used, bytes per block) goes into the header's
engine_config so a reader sees both.
"""

from __future__ import annotations

from typing import Any

from engine.adapters.versions import family

GIB = 1 << 30


def cache_block_bytes(config: Any) -> int:
    """Bytes of one KV-cache block (keys and values, every layer), as vLLM computes it."""
    return int(family().cpu_block_bytes(config.cache_config, config.model_config,
                                        config.parallel_config))


def swap_space_gib_for(num_cpu_blocks: int, block_bytes: int) -> float:
    """The swap space (GiB) from which vLLM derives exactly `num_cpu_blocks` blocks."""
    return (num_cpu_blocks * block_bytes + block_bytes / 2) / GIB


def derived_cpu_blocks(config: Any) -> int:
    """vLLM's GPU worker's count: `int(swap_space_bytes // block bytes)`."""
    return int(config.cache_config.swap_space_bytes // cache_block_bytes(config))


def translation(num_cpu_blocks: int, config: Any) -> dict[str, Any]:
    """What the header records: the count asked for and the swap space that yields it."""
    block_bytes = cache_block_bytes(config)
    return {"num_cpu_blocks": num_cpu_blocks, "block_bytes": block_bytes,
            "swap_space_gib": config.cache_config.swap_space_bytes / GIB,
            "derived_cpu_blocks": derived_cpu_blocks(config)}
