"""V1's KV accounting at the end of a workload (engine.adapters.kv_audit), from vLLM's
BlockPool, its single-type managers and, with a CPU tier, the offloading connector:

- every block but the null block free, none with a reference, and the free queue's count
  equal to the pool's;
- no request left in the scheduler or holding blocks in a manager (`req_to_blocks`);
- the prefix cache: cached hashes only while some block carries a hash (and back);
- the CPU tier: no job still in flight, and (0.33+) no chunk still pinned or being written.
"""

from __future__ import annotations

from typing import Any


def audit_v1(scheduler: Any, tier: Any = None) -> list[str]:
    problems: list[str] = []
    if scheduler.requests:
        problems.append(f"requests: {len(scheduler.requests)} requests still in the scheduler")
    manager = scheduler.kv_cache_manager
    pool = manager.block_pool
    usable = pool.num_gpu_blocks - 1  # the null block is never free
    free = pool.get_num_free_blocks()
    if free != usable:
        problems.append(f"gpu_blocks: {usable - free} of {usable} blocks still in use after "
                        f"every request finished")
    held = [b.block_id for b in pool.blocks if b.ref_cnt > 0 and not b.is_null]
    if held:
        problems.append(f"ref_cnt: {len(held)} blocks keep a reference (first: block "
                        f"{held[0]})")
    queued = pool.free_block_queue.num_free_blocks
    if queued != free:
        problems.append(f"free_queue: the free queue holds {queued} blocks, the pool "
                        f"counts {free}")
    for single in getattr(manager.coordinator, "single_type_managers", ()):
        holders = {rid: len(blocks) for rid, blocks in single.req_to_blocks.items() if blocks}
        if holders:
            rid, count = next(iter(holders.items()))
            problems.append(f"req_to_blocks: {len(holders)} finished requests still hold "
                            f"blocks (request {rid}: {count})")
    hashed = sum(1 for b in pool.blocks if getattr(b, "block_hash", None) is not None)
    cached = len(pool.cached_block_hash_to_block)
    if bool(hashed) != bool(cached):
        problems.append(f"prefix_cache: {cached} cached hashes but {hashed} blocks carry a "
                        f"hash")
    if tier is not None:
        problems += _tier(tier)
    return problems


def _tier(tier: Any) -> list[str]:
    from engine.adapters.v1.current import tier as names

    problems: list[str] = []
    jobs = names.jobs_in_flight(tier.connector)
    if jobs:
        problems.append(f"tier_jobs: {jobs} CPU-tier jobs never reported complete")
    cpu = tier.manager
    resident = names.resident_chunks(cpu)
    if resident > tier.capacity:
        problems.append(f"tier_chunks: {resident} chunks resident in a tier of "
                        f"{tier.capacity}")
    pending = getattr(cpu, "_num_write_pending_chunks", 0)
    if pending:
        problems.append(f"tier_pending: {pending} chunks still being written")
    evictable = getattr(cpu, "_num_evictable_cache_chunks", None)
    if evictable is not None and evictable != resident:
        problems.append(f"tier_pinned: {resident - evictable} of {resident} resident chunks "
                        f"still pinned (a load or store never released them)")
    return problems
