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

Each policy declares the engine kinds it acts on (`ENGINE_KINDS`, the header's `engine` field):
strict and watermark gate V0's `_schedule_chunked_prefill`, so they are V0 rules. A policy for
V1's scheduler is added here, by name, with ("v1",), and its rule next to `withholds_prefills`.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import ConfigError

POLICY_NAMES = ("off", "strict", "watermark")
DEFAULT_WATERMARK = 0.5
ENGINE_KINDS: dict[str, tuple[str, ...]] = {
    "off": ("v0", "v1"),  # vLLM as released: nothing to act on, any engine
    "strict": ("v0",),
    "watermark": ("v0",),
}
"""Which engine kinds (engine.stream.records.ENGINE_KINDS) each policy acts on: every name in
POLICY_NAMES has an entry. V1 policies go here."""


@dataclass(frozen=True)
class Policy:
    name: str  # one of POLICY_NAMES
    watermark: float = DEFAULT_WATERMARK  # only meaningful for "watermark"

    def __str__(self) -> str:
        if self.name == "watermark":
            return f"watermark:{self.watermark:g}"
        return self.name

    @property
    def engine_kinds(self) -> tuple[str, ...]:
        """The engine kinds this policy acts on ("v0", "v1")."""
        return ENGINE_KINDS[self.name]


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
    name, sep, level = str(text).strip().lower().partition(":")
    if name not in POLICY_NAMES:
        raise ConfigError(f"unknown policy {text!r}: use off, strict or watermark[:F] "
                          f"(e.g. watermark:0.5)")
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


def require_engine_kind(policy: Policy, kind: str) -> None:
    """Raise ConfigError if `policy` does not act on an engine of `kind` (the header's
    `engine`): a V0 rule on V1's scheduler would silently do nothing."""
    if kind not in policy.engine_kinds:
        acts = [name for name, kinds in ENGINE_KINDS.items() if kind in kinds]
        raise ConfigError(f"policy {policy} acts on the {', '.join(policy.engine_kinds)} engine, "
                          f"and this vLLM runs the {kind} engine: use {' or '.join(acts)}")


def next_policy(current: Policy) -> Policy:
    """The cycle behind the TUI's `f` key: off -> strict -> watermark -> off."""
    if current.name == "off":
        return Policy("strict")
    if current.name == "strict":
        return Policy("watermark", current.watermark)
    return Policy("off")
