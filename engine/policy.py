"""The swap-starvation fix as a policy: when may a chunked-prefill step admit new prefills?

vLLM 0.5.0.post1's `_schedule_chunked_prefill` admits new prefills even while groups sit
swapped out on the CPU (vLLM issue #5578), while `_schedule_default` does not. With many n>=2
requests the swapped queue grows until `_swap_out` finds no CPU block and aborts the engine.

- ``off``: vLLM as released; never withholds.
- ``strict``: vLLM PR #13539 (and #5633 before it). No new prefills if this step preempted or
  swapped out any group, or if any group is still swapped after the swap-in pass: running >
  swapped > waiting becomes a strict priority.
- ``watermark[:F]``: no new prefills while CPU KV-cache usage is at least F (default 0.5), the
  softer variant the issue's reporter suggested.

This module is pure: it decides from a few numbers, so the rule is testable without vLLM. The
numbers come from engine.adapters.v0.hooks, the one place that reads the scheduler's internals.

vLLM's V1 engine (0.11+) has no swap space; its thrash is recompute (#25538: a preempted request
resumed as soon as its next chunk fits, preempted again at once). Its policies, switchable the
same way, are an admission rule plus an optional choice of victim, joined with "+":

- ``full-isl``: vLLM's own `scheduler_reserve_full_isl` (PR #37307), switched live: admit or
  resume a request only when blocks for its whole context are free.
- ``whole-context``: the same, but beside what the prefills in flight still need: the free
  blocks must hold the request's whole context plus the rest of every running prefill.
- ``least-computed``: preempt the request that has computed the fewest tokens (vLLM PR #53723)
  rather than the last admitted.

``off`` is vLLM as configured, on either engine. Each policy declares the engine kinds it acts
on (`ENGINE_KINDS`, the header's `engine` field); one of the other engine kind is refused in one
line (`require_engine_kind`): a V0 rule on V1's scheduler would silently do nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import ConfigError

V1_ADMISSION = ("full-isl", "whole-context")  # V1 admission rules (at most one)
V1_VICTIM = ("least-computed",)  # V1 victim choices (at most one)
V1_NAMES = (*V1_ADMISSION, *V1_VICTIM)
V1_CYCLE = ("off", "full-isl", "whole-context", "whole-context+least-computed")
POLICY_NAMES = ("off", "strict", "watermark", *V1_NAMES)
DEFAULT_WATERMARK = 0.5
ENGINE_KINDS: dict[str, tuple[str, ...]] = {
    "off": ("v0", "v1"),  # vLLM as released: nothing to act on, any engine
    "strict": ("v0",),
    "watermark": ("v0",),
    "full-isl": ("v1",),
    "whole-context": ("v1",),
    "least-computed": ("v1",),
}
"""Which engine kinds (engine.stream.records.ENGINE_KINDS) each policy acts on: every name in
POLICY_NAMES has an entry (a V1 combination acts where its parts do)."""


@dataclass(frozen=True)
class Policy:
    name: str  # one of POLICY_NAMES
    watermark: float = DEFAULT_WATERMARK  # only meaningful for "watermark"

    def __str__(self) -> str:
        if self.name == "watermark":
            return f"watermark:{self.watermark:g}"
        return self.name

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.name.split("+"))

    @property
    def engine_kinds(self) -> tuple[str, ...]:
        """The engine kinds this policy acts on ("v0", "v1")."""
        return ENGINE_KINDS[self.parts[0]]

    @property
    def admission(self) -> str:
        """V1: the admission rule in force ("off", "full-isl" or "whole-context")."""
        return next((p for p in self.parts if p in V1_ADMISSION), "off")

    @property
    def victim(self) -> str:
        """V1: how a victim is chosen ("last", vLLM's own, or "least-computed")."""
        return "least-computed" if "least-computed" in self.parts else "last"


def require_engine_kind(policy: Policy, kind: str) -> None:
    """Raise ConfigError if `policy` does not act on an engine of `kind` (the header's
    `engine`): a V0 rule on V1's scheduler would silently do nothing."""
    if kind not in policy.engine_kinds:
        acts = [name for name, kinds in ENGINE_KINDS.items() if kind in kinds]
        combine = " (combine with +, e.g. whole-context+least-computed)" if kind == "v1" else ""
        raise ConfigError(f"policy {policy} acts on the {', '.join(policy.engine_kinds)} engine, "
                          f"and this vLLM runs the {kind} engine: use {' or '.join(acts)}"
                          f"{combine}")


@dataclass(frozen=True)
class PrefillGate:
    """What the scheduler knows at the moment it is about to schedule new prefills."""

    preempted_this_step: int  # groups preempted (recompute or swap) by this step's running pass
    still_swapped: int  # groups left in the swapped queue after this step's swap-in pass
    cpu_usage: float  # CPU KV-cache usage in [0, 1], swap-outs of this step included


def withholds_prefills(policy: Policy, gate: PrefillGate) -> bool:
    """True if `policy` forbids new prefills in this step."""
    if policy.name == "strict":
        return gate.preempted_this_step > 0 or gate.still_swapped > 0
    if policy.name == "watermark":
        return gate.cpu_usage >= policy.watermark
    return False


def parse_policy(text: str | Policy) -> Policy:
    """'off' | 'strict' | 'watermark' | 'watermark:F' with 0 < F <= 1."""
    if isinstance(text, Policy):
        return text
    lowered = str(text).strip().lower()
    if "+" in lowered or lowered in V1_NAMES:
        return _parse_v1(text, lowered)
    name, sep, level = lowered.partition(":")
    if name not in ("off", "strict", "watermark"):
        raise ConfigError(f"unknown policy {text!r}: use off, strict or watermark[:F] "
                          f"(e.g. watermark:0.5) on V0, off, full-isl, whole-context or "
                          f"least-computed on V1")
    if name != "watermark":
        if sep:
            raise ConfigError(f"policy {name!r} takes no level; only watermark:F does")
        return Policy(name)
    if not sep:
        return Policy(name)
    try:
        watermark = float(level)
    except ValueError:
        raise ConfigError(f"bad watermark level {level!r}: use a number in (0, 1], "
                          f"e.g. watermark:0.5") from None
    if not 0.0 < watermark <= 1.0:
        raise ConfigError(f"watermark level must be in (0, 1], got {level}")
    return Policy(name, watermark)


def _parse_v1(text: str, lowered: str) -> Policy:
    """'whole-context', 'least-computed', 'full-isl+least-computed': one admission rule and one
    victim choice at most, written admission first."""
    parts = [p.strip() for p in lowered.split("+")]
    bad = [p for p in parts if p not in V1_NAMES]
    if bad:
        raise ConfigError(f"unknown V1 policy part {bad[0]!r} in {text!r}: combine full-isl or "
                          f"whole-context with least-computed, e.g. whole-context+least-computed")
    admission = [p for p in parts if p in V1_ADMISSION]
    victim = [p for p in parts if p in V1_VICTIM]
    if len(admission) > 1 or len(victim) > 1:
        raise ConfigError(f"policy {text!r} names two rules of one kind: give one admission "
                          f"rule (full-isl or whole-context) and at most least-computed")
    return Policy("+".join((*admission, *victim)))


def next_policy(current: Policy, kind: str = "v0") -> Policy:
    """The cycle behind the TUI's `f` key: off -> strict -> watermark -> off on V0; on V1
    off -> full-isl -> whole-context -> whole-context+least-computed -> off."""
    if kind == "v1":
        name = str(current)
        i = V1_CYCLE.index(name) if name in V1_CYCLE else -1
        return Policy(V1_CYCLE[(i + 1) % len(V1_CYCLE)])
    if current.name == "off":
        return Policy("strict")
    if current.name == "strict":
        return Policy("watermark", current.watermark)
    return Policy("off")
