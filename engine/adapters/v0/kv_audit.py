"""V0's KV accounting at the end of a workload (engine.adapters.kv_audit): the block
manager's free GPU and CPU blocks against its totals, and its block tables, which must hold no
sequence once every group has finished."""

from __future__ import annotations

from typing import Any


def audit_v0(scheduler: Any) -> list[str]:
    problems: list[str] = []
    for name in ("waiting", "running", "swapped"):
        left = len(getattr(scheduler, name, ()))
        if left:
            problems.append(f"queue: {left} groups left in the scheduler's {name} queue")
    manager = scheduler.block_manager
    for device in ("gpu", "cpu"):
        free = getattr(manager, f"get_num_free_{device}_blocks")()
        total = getattr(manager, f"num_total_{device}_blocks")
        if free != total:
            problems.append(f"{device}_blocks: {total - free} of {total} {device.upper()} "
                            f"blocks still in use after every request finished")
    tables = getattr(manager, "block_tables", {})
    if tables:
        problems.append(f"block_tables: {len(tables)} sequences still hold a block table")
    return problems
