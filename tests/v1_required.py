"""What every test file for vLLM's V1 engine (0.18, 0.29, 0.33, 0.34) starts with, kept in one place.

- `needs_v1`: the module-level mark that skips the file, with the install command, where the
  installed vLLM is not the V1 line (the V0 venvs run the whole suite too).
- `require_hash_seed()`: V1 sim runs are deterministic only when PYTHONHASHSEED=0 was set
  before the interpreter started (vLLM's connector walks sets); a V1 run without it would fail
  later and obscurely, so the file refuses at import with the command that works.
"""

from __future__ import annotations

import sys

import pytest

from engine.adapters.versions import SUPPORTED, installed_version, release_for

RELEASE = release_for(installed_version())
V1_INSTALLED = RELEASE is not None and RELEASE.engine == "v1"
V1_RELEASES = [r for r in SUPPORTED if r.engine == "v1"]
NEEDS_V1 = ("needs vLLM's V1 engine (" + ", ".join(r.version for r in V1_RELEASES) + "): "
            + "; ".join(r.install for r in V1_RELEASES))

needs_v1 = pytest.mark.skipif(not V1_INSTALLED, reason=NEEDS_V1)


def cpu_tier_refusal() -> str | None:
    """Why the installed V1 release refuses the CPU tier (its tier module's REFUSAL: 0.18's
    offloading connector speaks a worker contract the sim does not play), or None."""
    if not V1_INSTALLED:
        return None
    from engine.adapters.v1.current import tier

    return getattr(tier, "REFUSAL", None)


def require_hash_seed() -> None:
    """Refuse a V1 test file imported without PYTHONHASHSEED=0 (only where V1 is installed)."""
    if V1_INSTALLED and sys.flags.hash_randomization:
        raise RuntimeError("run the V1 tests with PYTHONHASHSEED=0 set before Python starts: "
                           "PYTHONHASHSEED=0 pytest tests/test_v1_*.py")
