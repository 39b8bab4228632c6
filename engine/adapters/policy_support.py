"""What the installed vLLM release can take, probed for engine.policy's checks (which own every
rule of whether a policy can act on an engine). Only the probing lives here: it reads the V1
family's flags, and importing the family imports vLLM, so it happens only once a check asks
about a V1 rule that needs it.
"""

from __future__ import annotations

from engine.policy import PolicyEngine


class InstalledRelease:
    """engine.policy.Release for the vLLM this process imports."""

    @property
    def scan_skip(self) -> bool:
        # imports vLLM: only once a V1 rule asks
        from engine.adapters.v1.current import fam

        return bool(fam.HAS_SCAN_SKIP)

    @property
    def async_sim(self) -> bool:
        # imports vLLM: only once a V1 rule asks
        from engine.adapters.v1.current import fam

        return bool(fam.HAS_ASYNC_SIM)


INSTALLED = InstalledRelease()


def installed(kind: str, async_scheduling: bool | None = None,
              sim: bool | None = None) -> PolicyEngine:
    """The installed vLLM's engine of `kind`, with what the caller knows of its settings (a
    Session, from its spec)."""
    return PolicyEngine(kind, INSTALLED, async_scheduling, sim)
