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
- ``reserve``: admit a waiting group only while the worst-case blocks of everything admitted
  (every unfinished sequence grown to its prompt plus `max_tokens`, counted as the release's
  block manager counts it) plus one victim's worth of slack fit in GPU + CPU blocks. `strict`
  and `watermark` only delay the abort once the groups already admitted outgrow both caches;
  this makes it impossible, at the cost of running fewer groups at once. Where a victim has one
  sequence (from vLLM 0.6.4 every group of an n>1 request does) a swap-out that would not fit is
  turned into a preemption by recompute instead, so no admission needs refusing for it.

Why one victim of slack: vLLM preempts only when the GPU is full (fewer free blocks than the
group that must grow has sequences), and the victim's blocks move to the CPU whole while the
GPU blocks they free cannot hold anyone else's swapped blocks. With committed demand D, GPU+CPU
capacity C, the largest admitted group's worst case W and its sequence count S, the swap-out
fits whenever D + W + S <= C.

This module is pure: it decides from a few numbers, so the rule is testable without vLLM. The
numbers come from engine.adapters.v0.hooks, the one place that reads the scheduler's internals.

vLLM's V1 engine (0.11+) has no swap space; its thrash is recompute (#25538: a preempted request
resumed as soon as its next chunk fits, preempted again at once). Its policies, switchable the
same way, are an admission rule plus an optional choice of victim, joined with "+":

- ``full-isl``: vLLM's own `scheduler_reserve_full_isl` (PR #37307), switched live: admit or
  resume a request only when blocks for its whole context are free. vLLM 0.18 has no such
  option: there the observatory's hook makes vLLM's check itself (engine.adapters.v1.hooks).
- ``whole-context``: the same, but beside what the prefills in flight still need: the free
  blocks must hold the request's whole context plus the rest of every running prefill.
- ``least-computed``: preempt the request that has computed the fewest tokens (vLLM PR #53723)
  rather than the last admitted.
- ``per-iteration-count``: under async scheduling (vLLM #45257), vLLM's waiting scan counts
  every request in its running list against `max_num_seqs`, also those it passes by this step
  because the step in flight already samples their last token (a `max_tokens=1` prefill, as a
  P/D prefill node runs): fewer than `max_num_seqs` are scheduled while requests wait. The
  rule (vLLM PR #45339's) counts the sequences scheduled this iteration: during `schedule()`
  vLLM's own limits are raised by the number of those requests, and put back after. It acts
  only under async scheduling (vLLM 0.33 and later on the sim), and on the sim only: vLLM's
  running list then outgrows max_num_seqs, which a real model runner's batch cannot hold.
- ``skip-and-continue``: the waiting scan's order (vLLM PR #35852, for #31731's head-of-line
  blocking). vLLM stops admitting at the first request whose blocks it refuses; under this rule
  a refused request is skipped while the free blocks stay short of what it was refused, so the
  lighter requests behind it are admitted. vLLM makes every allocation itself; the rule only
  tells vLLM's scan to pass the refused request by, through the scan's own skip path
  (deferred, as a request waiting on a KV load is). It needs that path: vLLM 0.33 and later.

``off`` is vLLM as configured, on either engine. Each policy declares the engine kinds it acts
on (`ENGINE_KINDS`, the header's `engine` field); one of the other engine kind is refused in one
line (`require_engine_kind`): a V0 rule on V1's scheduler would silently do nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol

from engine.errors import ConfigError
from engine.kinds import kind_of

V1_ADMISSION = ("full-isl", "whole-context")  # V1 admission rules (at most one)
V1_VICTIM = ("least-computed",)  # V1 victim choices (at most one)
V1_ORDER = ("skip-and-continue",)  # V1 waiting-scan orders (at most one)
V1_SEATS = ("per-iteration-count",)  # V1 seat counts under async scheduling (at most one)
V1_NAMES = (*V1_ADMISSION, *V1_VICTIM, *V1_ORDER, *V1_SEATS)
POLICY_NAMES = ("off", "strict", "watermark", "reserve", *V1_NAMES)
DEFAULT_WATERMARK = 0.5
ENGINE_KINDS: dict[str, tuple[str, ...]] = {
    "off": ("v0", "v1"),  # vLLM as released: nothing to act on, any engine
    "strict": ("v0",),
    "watermark": ("v0",),
    "reserve": ("v0",),  # reads the V0 block manager's counts and wraps its `_preempt`
    "full-isl": ("v1",),
    "whole-context": ("v1",),
    "least-computed": ("v1",),
    "skip-and-continue": ("v1",),
    "per-iteration-count": ("v1",),
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

    @property
    def order(self) -> str:
        """V1: how vLLM's waiting scan treats a refused request ("stop", vLLM's own, or
        "skip-and-continue")."""
        return "skip-and-continue" if "skip-and-continue" in self.parts else "stop"

    @property
    def seats(self) -> str:
        """V1: what vLLM's waiting scan counts against max_num_seqs ("running", vLLM's own:
        every request in its running list, or "per-iteration-count": under async scheduling
        not those whose last token is already in flight, vLLM PR #45339)."""
        return "per-iteration-count" if "per-iteration-count" in self.parts else "running"


def require_engine_kind(policy: Policy, kind: str) -> None:
    """Raise ConfigError if `policy` does not act on an engine of `kind` (the header's
    `engine`): a V0 rule on V1's scheduler would silently do nothing."""
    if kind not in policy.engine_kinds:
        acts = [name for name, kinds in ENGINE_KINDS.items() if kind in kinds]
        combine = (" (combine with +, e.g. whole-context+least-computed)"
                   if kind_of(kind).combines_policies else "")
        raise ConfigError(f"policy {policy} acts on the {', '.join(policy.engine_kinds)} engine, "
                          f"and this vLLM runs the {kind} engine: use {' or '.join(acts)}"
                          f"{combine}")


@dataclass(frozen=True)
class PrefillGate:
    """What the scheduler knows at the moment it is about to schedule new prefills."""

    preempted_this_step: int  # groups preempted (recompute or swap) by this step's running pass
    still_swapped: int  # groups left in the swapped queue after this step's swap-in pass
    cpu_usage: float  # CPU KV-cache usage in [0, 1], swap-outs of this step included


def require_seats_engine(policy: Policy, async_scheduling: bool | None,
                         sim: bool | None) -> None:
    """Raise ConfigError if `per-iteration-count` is asked of an engine without async
    scheduling (nothing is ever in flight there: vLLM's own count is already the
    iteration's) or, when `sim` says so, of one with a real model runner (whose batch of
    max_num_seqs slots the rule could overflow). Needs no vLLM: a spec is checked with it
    before anything is built."""
    if policy.seats != "per-iteration-count":
        return
    if sim is False:
        raise ConfigError(f"policy {policy} runs on the sim backend only: it lets vLLM's "
                          f"running list outgrow max_num_seqs, and a real model runner's "
                          f"batch has max_num_seqs slots: use --backend sim, or drop "
                          f"per-iteration-count")
    if async_scheduling is False:
        raise ConfigError(f"policy {policy} acts only under async scheduling (vLLM #45257): "
                          f"add --async-scheduling, or drop per-iteration-count")


class Release(Protocol):
    """What the installed vLLM release's scheduler has a way in for. The adapters probe it
    (engine.adapters.policy_support.INSTALLED); a check reads it only when a rule needs it, so
    asking about any other rule imports no vLLM."""

    @property
    def scan_skip(self) -> bool:
        """Its waiting scan can pass a request by (0.33 added the path)."""

    @property
    def async_sim(self) -> bool:
        """Its sim runs async scheduling (from 0.33)."""


@dataclass(frozen=True)
class PolicyEngine:
    """The engine a policy is asked of: its kind, its release, and where known (a spec says,
    or the scheduler of an engine the observatory attached to) whether it schedules
    asynchronously and runs the sim. None: not known here."""

    kind: str
    release: Release
    async_scheduling: bool | None = None
    sim: bool | None = None


def require_policy(policy: Policy, engine: PolicyEngine) -> None:
    """Raise ConfigError (one line) if `policy` cannot act on `engine`: a rule of the other
    engine kind, or one its release or settings cannot take (`require_capable`). Asked once,
    before anything changes: before an engine is built for a spec, before a switch is taken,
    never inside vLLM's step."""
    require_engine_kind(policy, engine.kind)
    require_capable(policy, engine)


def require_capable(policy: Policy, engine: PolicyEngine) -> None:
    """Raise ConfigError if a rule of `engine`'s kind has no way in on its release or
    settings: `skip-and-continue` needs the scan's skip path (vLLM 0.33 or later);
    `per-iteration-count` needs a sim that runs async scheduling (0.33 or later), then async
    scheduling and the sim backend (`require_seats_engine`). The rules are V1's, so a V0
    engine (refused them by kind) is never probed."""
    if policy.order == "skip-and-continue" and not engine.release.scan_skip:
        raise ConfigError(f"policy {policy} needs vLLM 0.33 or later, whose waiting scan can "
                          f"pass a request by; this vLLM cannot: run it on 0.33.0 or 0.34.0, "
                          f"or drop skip-and-continue")
    if policy.seats != "per-iteration-count":
        return
    if not engine.release.async_sim:
        raise ConfigError(f"policy {policy} acts under async scheduling, which the sim runs "
                          f"from vLLM 0.33: run it on 0.33.0 or 0.34.0, or drop "
                          f"per-iteration-count")
    require_seats_engine(policy, engine.async_scheduling, engine.sim)


def refusals(engine: PolicyEngine) -> dict[str, str]:
    """Each policy of `engine`'s kind that it cannot take, with the one line `require_policy`
    refuses it with: what the live monitor shows beside a policy it cannot switch to (a
    combination is refused where one of its parts is)."""
    refused = {}
    for name, kinds in ENGINE_KINDS.items():
        if engine.kind not in kinds:
            continue
        try:
            require_policy(parse_policy(name), engine)
        except ConfigError as exc:
            refused[name] = str(exc)
    return refused


def withholds_prefills(policy: Policy, gate: PrefillGate) -> bool:
    """True if `policy` forbids new prefills in this step."""
    if policy.name == "strict":
        return gate.preempted_this_step > 0 or gate.still_swapped > 0
    if policy.name == "watermark":
        return gate.cpu_usage >= policy.watermark
    return False


@dataclass(frozen=True)
class Demand:
    """Worst-case KV blocks of the groups a scheduler has admitted, as its block manager counts
    them (engine.adapters.v0.hooks measures it)."""

    blocks: int  # worst case of every admitted, unfinished group, summed
    capacity: int  # GPU + CPU blocks
    largest_group: int = 0  # the largest single group's worst case (the biggest victim)
    most_seqs: int = 0  # the most sequences one admitted group can run at once
    # every admitted group has one sequence and a swap-out that does not fit is recomputed
    # instead (reserve's fallback): no swap-out can abort, whatever the demand
    recomputable: bool = False

    def slack(self, group_blocks: int = 0, group_seqs: int = 0) -> int:
        """Blocks set aside so that a swap-out always fits (see the module docstring)."""
        return max(self.largest_group, group_blocks) + max(self.most_seqs, group_seqs)

    @property
    def guaranteed(self) -> bool:
        """Whether no swap-out of the admitted groups can overflow the CPU: False when the
        demand already admitted is too large (a `reserve` switched on too late)."""
        return self.recomputable or self.blocks + self.slack() <= self.capacity


def admissible(demand: Demand, waiting: Iterable[tuple[int, int]]) -> int:
    """How many of the waiting groups, in queue order, `reserve` lets vLLM consider now.

    `waiting` yields (worst-case blocks, sequences) per group, (0, 0) for a group that was
    admitted before (preempted by recompute: its demand is counted already, so it always may
    come back, or its blocks would stay committed for ever). Stops at the first group that does
    not fit, so the queue's order (vLLM's FCFS) is kept. With nothing admitted the first group
    is let in even if it alone is too large to guarantee: refusing it would starve the engine."""
    blocks, largest, seqs = demand.blocks, demand.largest_group, demand.most_seqs
    count = 0
    for group_blocks, group_seqs in waiting:
        if group_blocks == 0 or (demand.recomputable and group_seqs <= 1):
            count += 1  # counted already, or its swap-out can never abort (recomputed instead)
            continue
        largest, seqs = max(largest, group_blocks), max(seqs, group_seqs)
        if blocks + group_blocks + largest + seqs > demand.capacity and blocks > 0:
            break
        blocks += group_blocks
        count += 1
    return count


def parse_policy(text: str | Policy) -> Policy:
    """'off' | 'strict' | 'watermark' | 'watermark:F' with 0 < F <= 1 | 'reserve'."""
    if isinstance(text, Policy):
        return text
    lowered = str(text).strip().lower()
    if "+" in lowered or lowered in V1_NAMES:
        return _parse_v1(text, lowered)
    name, sep, level = lowered.partition(":")
    if name not in ("off", "strict", "watermark", "reserve"):
        raise ConfigError(f"unknown policy {text!r}: use off, strict, watermark[:F] "
                          f"(e.g. watermark:0.5) or reserve on V0; off, full-isl, "
                          f"whole-context, least-computed, skip-and-continue or "
                          f"per-iteration-count on V1")
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
    """'whole-context', 'least-computed', 'full-isl+least-computed+skip-and-continue': one
    admission rule, one victim choice and one scan order at most, written in that order."""
    parts = [p.strip() for p in lowered.split("+")]
    bad = [p for p in parts if p not in V1_NAMES]
    if bad:
        raise ConfigError(f"unknown V1 policy part {bad[0]!r} in {text!r}: combine full-isl or "
                          f"whole-context with least-computed and skip-and-continue, e.g. "
                          f"whole-context+least-computed")
    admission = [p for p in parts if p in V1_ADMISSION]
    victim = [p for p in parts if p in V1_VICTIM]
    order = [p for p in parts if p in V1_ORDER]
    seats = [p for p in parts if p in V1_SEATS]
    if len(admission) > 1 or len(victim) > 1 or len(order) > 1 or len(seats) > 1:
        raise ConfigError(f"policy {text!r} names two rules of one kind: give one admission "
                          f"rule (full-isl or whole-context), at most least-computed and at "
                          f"most skip-and-continue")
    return Policy("+".join((*admission, *victim, *order, *seats)))
