"""The KV accounting at the end of a workload, read from vLLM's own objects: the hunt's
`kv_accounting` detector. Once every request has finished, every KV block must be free, no
request may still hold one, and the prefix cache's and the CPU tier's counts must agree with
the blocks. One module per engine kind holds vLLM's names (engine/adapters/<kind>/kv_audit.py);
this picks the installed one. Each problem is one line, "key: words" (the key de-duplicates)."""

from __future__ import annotations

from typing import Any


def audit(driver: Any) -> list[str]:
    """Problems with the KV accounting of `driver`'s engine (a Session's), [] when it adds up."""
    if driver.kind == "v1":
        from engine.adapters.v1.kv_audit import audit_v1

        return audit_v1(driver.scheduler, getattr(driver, "tier", None))
    from engine.adapters.v0.kv_audit import audit_v0

    return audit_v0(driver.scheduler)
