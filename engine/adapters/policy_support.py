"""Whether the installed vLLM can apply a policy, asked before an engine is built and before a
switch is taken, never inside vLLM's step: a refusal is one line to whoever asked (the command
line, a client, `engine.attach`), and the engine keeps the policy it has."""

from __future__ import annotations

from engine.errors import ConfigError
from engine.policy import (ENGINE_KINDS, Policy, parse_policy, require_engine_kind,
                           require_seats_engine)


def require_policy(policy: Policy, kind: str, async_scheduling: bool | None = None,
                   sim: bool | None = None) -> None:
    """Raise ConfigError (one line) if `policy` cannot act on the installed vLLM, whose engine
    is of `kind`: a rule of the other engine kind, or a V1 rule this release's scheduler has
    no way in for (`skip-and-continue` before 0.33); where the caller knows the engine (a
    Session, from its spec), `per-iteration-count` without async scheduling or off the sim."""
    require_engine_kind(policy, kind)
    if kind == "v1":
        require_scan_skip(policy)
        require_async_sim(policy, async_scheduling, sim)


def require_scan_skip(policy: Policy) -> None:
    """Raise ConfigError if `policy` needs a skip path in vLLM's waiting scan and the installed
    release has none (0.33 added `_handle_blocked_waiting_request`)."""
    if policy.order != "skip-and-continue":
        return
    from engine.adapters.v1.current import fam  # imports vLLM: only once a V1 rule asks

    if not fam.HAS_SCAN_SKIP:
        raise ConfigError(f"policy {policy} needs vLLM 0.33 or later, whose waiting scan can "
                          f"pass a request by; this vLLM cannot: run it on 0.33.0 or 0.34.0, "
                          f"or drop skip-and-continue")


def require_async_sim(policy: Policy, async_scheduling: bool | None = None,
                      sim: bool | None = None) -> None:
    """Raise ConfigError if `policy` counts seats per iteration (`per-iteration-count`, vLLM
    #45257) where it cannot act: a release whose sim runs no async scheduling (before 0.33),
    or an engine that cannot take it (`require_seats_engine`)."""
    if policy.seats != "per-iteration-count":
        return
    from engine.adapters.v1.current import fam  # imports vLLM: only once a V1 rule asks

    if not fam.HAS_ASYNC_SIM:
        raise ConfigError(f"policy {policy} acts under async scheduling, which the sim runs "
                          f"from vLLM 0.33: run it on 0.33.0 or 0.34.0, or drop "
                          f"per-iteration-count")
    require_seats_engine(policy, async_scheduling, sim)


def refusals(kind: str, async_scheduling: bool | None = None,
             sim: bool | None = None) -> dict[str, str]:
    """Each policy of engine `kind` that this vLLM and engine cannot take, with the one line
    `require_policy` refuses it with: what the live monitor shows beside a policy it cannot
    switch to (a combination is refused where one of its parts is)."""
    refused = {}
    for name, kinds in ENGINE_KINDS.items():
        if kind not in kinds:
            continue
        try:
            require_policy(parse_policy(name), kind, async_scheduling, sim)
        except ConfigError as exc:
            refused[name] = str(exc)
    return refused
