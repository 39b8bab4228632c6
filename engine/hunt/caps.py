"""What the installed release lets the hunt vary: its engine kind, the policies it can apply,
and the V1 features the sim runs on it (async scheduling from 0.33, the CPU tier from 0.29).
Asked in the process that runs the workloads (it imports vLLM)."""

from __future__ import annotations

import msgspec

from engine.policy import POLICY_NAMES, ENGINE_KINDS, parse_policy

V1_COMBOS = ("whole-context+least-computed", "full-isl+least-computed")


class Caps(msgspec.Struct, frozen=True, kw_only=True):
    vllm: str
    kind: str  # "v0" or "v1"
    policies: tuple[str, ...]  # every policy this release can run
    async_scheduling: bool = False
    cpu_tier: bool = False
    scan_skip: bool = False


def installed() -> Caps:
    from engine.adapters.versions import installed_version, require_supported

    release = require_supported()
    kind = release.engine
    names = [n for n in POLICY_NAMES if kind in ENGINE_KINDS[n]]
    if kind == "v0":
        return Caps(vllm=str(installed_version()), kind=kind,
                    policies=tuple(n for n in names if n != "watermark") + ("watermark:0.5",))
    from engine.adapters.v1.current import fam

    async_ok, skip = bool(fam.HAS_ASYNC_SIM), bool(fam.HAS_SCAN_SKIP)
    policies = [n for n in names + list(V1_COMBOS)
                if (skip or parse_policy(n).order != "skip-and-continue")
                and (async_ok or parse_policy(n).seats != "per-iteration-count")]
    return Caps(vllm=str(installed_version()), kind=kind, policies=tuple(policies),
                async_scheduling=async_ok, cpu_tier=fam.TIER != "tier_v018", scan_skip=skip)
