"""The installed vLLM's V1 API family, resolved once: `fam` and `tier`.

Every V1 module that reads vLLM's private names reaches them through these two, never through a
release's module by name, so a release that renames them adds one `family_<name>.py` (and, if
its offloading connector differs, one `tier_<name>.py`) plus its row in
engine.adapters.versions.SUPPORTED, and nothing else learns of it.

- `fam`: engine.adapters.v1.family_<family> of the installed release (the scheduler, a
  request, a SchedulerOutput, building the engine), typed by its interface
  (engine.adapters.v1.family.V1Family);
- `tier`: the module the family names in its `TIER` (the offloading connector's names).

Importing this imports vLLM: only modules that run a V1 engine import it, after the command
line has checked that the installed vLLM is a supported V1 release.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import cast

from engine.adapters.v1.family import V1Family
from engine.adapters.versions import family

fam: V1Family = cast(V1Family, family())  # a module: its functions answer the Protocol
tier: ModuleType = importlib.import_module(f"engine.adapters.v1.{fam.TIER}")
