"""The two engine kinds vLLM has had, as objects that answer what differs between them.

V0 is LLMEngine (vLLM 0.5 to 0.10.2), V1 is EngineCore (0.11 on); a recording's Header says which
made it (`engine`, "v0" or "v1"), as does a release's row. The edges (the CLI, the analysis, the
hunt, the sweep, the TUI) ask the kind a question (does it swap? does it watch admission
stalls?) instead of testing the name, so a third kind, or a question a new release changes, is
answered here once. A module's own per-kind tables (plots, columns, options) stay with the
module, keyed by the kind's name.

This module imports nothing of the project: any layer may ask it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class EngineKind:
    name: str  # "v0" or "v1": the Header's `engine`, a release row's engine
    default_preset: str  # the workload preset a run on this kind starts from
    usual_fix: str  # the policy `f` switches on when the preset names none (engine.spec)
    # The release a refusal names to install for this kind: the default V0 release, and the V1
    # line's reference release (README's tables name the others).
    reference_extra: str
    # A swap space: V0 swaps preempted groups out to CPU blocks (its runway, its swap abort, its
    # watermark). V1 recomputes; its CPU tier, where a run has one, is a prefix cache.
    swaps: bool
    # The admission-stall watchdog (engine.analysis.stall.StallWatch): V1's scheduler can leave
    # free seats empty while a request waits (#53130, #31731); V0's stalls are its swap
    # runway's.
    watches_stalls: bool
    # A request of n samples is n requests to the scheduler (V1's front end fans it out); V0
    # schedules one group of n sequences.
    fans_out_samples: bool
    # Its sim needs the interpreter's environment set before it starts (PYTHONHASHSEED, the sim
    # platform's plugin: engine.adapters.v1.platform).
    sim_env_at_start: bool
    # Its policies combine with + (an admission rule, a victim choice, a scan order, a seat
    # count: engine.policy); V0's are one rule each.
    combines_policies: bool


V0 = EngineKind("v0", default_preset="seed-5578", usual_fix="reserve", reference_extra="vllm050",
                swaps=True, watches_stalls=False, fans_out_samples=False,
                sim_env_at_start=False, combines_policies=False)
V1 = EngineKind("v1", default_preset="v1-thrash", usual_fix="whole-context",
                reference_extra="vllm033", swaps=False, watches_stalls=True,
                fans_out_samples=True, sim_env_at_start=True, combines_policies=True)

KINDS: tuple[EngineKind, ...] = (V0, V1)  # oldest first
_BY_NAME = {kind.name: kind for kind in KINDS}


def kind_of(name: str | None) -> EngineKind:
    """The kind called `name`. Anything but a known name is V0, as the Header's `engine`
    defaults to it (every recording made before the field existed was V0's)."""
    return _BY_NAME.get(name or "", V0)


def newest_of(names: Iterable[str | None]) -> EngineKind:
    """The newest kind among `names` (V0 if none): a set of rows with any V1 row among them is
    read in V1's vocabulary."""
    return max((kind_of(n) for n in names), key=KINDS.index, default=V0)


def common_kind(names: Iterable[str | None]) -> EngineKind | None:
    """The one kind every name in `names` is (None when they differ, or there are none)."""
    kinds = {kind_of(n) for n in names}
    return kinds.pop() if len(kinds) == 1 else None
