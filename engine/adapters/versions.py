"""Which vLLM releases the observatory speaks, and which adapter family each one uses.

vLLM is an extra of this package, one per supported release (pyproject.toml), so the installed
vLLM is whatever the environment has: ours from `pip install -e '.[vllm050,test]'`, or a verl
environment's own 0.6.3. This module reads the installed version from package metadata without
importing vLLM (a second and more), and turns a missing or unsupported one into one line that
names every supported release and the command that installs it.

Families group releases whose scheduler and engine APIs the hooks treat alike
(engine/adapters/<engine>/family_*.py); `family()` imports the installed release's module.
Which release resolves to which family, and which are refused and why, is one data file,
engine/adapters/releases.json (engine.adapters.release_table), written by the releases benches.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from engine.adapters import release_table
from engine.errors import EngineError


@dataclass(frozen=True)
class Release:
    version: str  # vllm.__version__ without a local "+..." part
    extra: str  # this package's extra that pins it and its companions ("": no CI line)
    family: str  # engine.adapters.<engine>.family_<family>
    engine: str = "v0"  # the engine kind this release runs: "v0" (LLMEngine) or "v1" (EngineCore)
    # The release's wheel pins a package the index lacks: its install needs the clone's
    # overrides/<extra>.txt, which only uv takes (`--override`; pip has no such option).
    override: bool = False
    # Its V1 sim runs on the observatory's own vLLM platform (engine.adapters.v1.sim_platform),
    # not on vLLM's CPU platform: a release that resolves its platform while `import vllm`
    # runs (0.24, 0.27.1) or whose CPU platform refuses any engine on x86 without triton-cpu
    # (0.34).
    sim_plugin: bool = False
    pins: tuple[str, ...] = ()  # a release with no extra: its companions beside vllm==version
    earned: str = field(default="", compare=False)  # the date a bench earned it its family
    bench: Any = field(default=None, compare=False)  # that run's figures (release_table.Bench)

    @property
    def ci(self) -> bool:
        """A CI line runs it (it has its own extra in pyproject.toml)."""
        return bool(self.extra)

    @property
    def install(self) -> str:
        if not self.extra:
            pins = " ".join(f"'{pin}'" for pin in (f"vllm=={self.version}", *self.pins))
            return f"pip install -e '.[test]' {pins}"
        if self.override:
            return (f"uv pip install -e '.[{self.extra},test]' "
                    f"--override overrides/{self.extra}.txt")
        return f"pip install -e '.[{self.extra},test]'"


def _from_table() -> tuple[tuple[Release, ...], dict[str, str]]:
    rows = release_table.load()
    known = tuple(Release(r.version, r.extra, r.family, engine=r.engine, override=r.override,
                          sim_plugin=r.sim_plugin, pins=tuple(r.pins), earned=r.earned,
                          bench=r.bench)
                  for r in rows if r.family)
    return known, {r.version: r.refused for r in rows if not r.family}


KNOWN, REFUSED = _from_table()
"""KNOWN: every release that resolves to a family (engine/adapters/releases.json), oldest
first; REFUSED: every release the table refuses, with why (what is missing), in one line."""
SUPPORTED: tuple[Release, ...] = tuple(r for r in KNOWN if r.ci)
"""The releases a CI line runs, each with its own extra (the other KNOWN ones were run by the
releases bench and resolve to one of these rows' families)."""
DEFAULT = SUPPORTED[0]


def speaks() -> str:
    """The releases the observatory speaks, by engine kind, in one phrase for help texts
    ("the V0 engine of vLLM 0.5.0.post1 to 0.10.2"); made from SUPPORTED, so it stays true as
    releases and engine kinds are added."""
    kinds: dict[str, list[str]] = {}
    for release in SUPPORTED:
        kinds.setdefault(release.engine, []).append(release.version)
    return " and ".join(
        f"the {kind.upper()} engine of vLLM {versions[0]}"
        + (f" to {versions[-1]}" if len(versions) > 1 else "")
        for kind, versions in kinds.items())


def installed_version() -> str | None:
    """The installed vLLM's version from its metadata, or None if there is none. (Imported
    here: importlib.metadata costs every command ~30 ms, and only this needs it.)"""
    from importlib import metadata

    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return None


TRY_RELEASE = "OBSERVATORY_TRY_RELEASE"
"""bench/v1_releases.py sets it to a known release's version to try an installed vLLM that no
row resolves yet with that row's family and platform (how a release earns its row)."""


TRY_FAMILY = "OBSERVATORY_TRY_FAMILY"
"""bench/v1_releases.py sets it to a family module no row uses yet (`v019`, or `v019+plugin` to
run its sim on the observatory's platform) to try an installed vLLM the table does not
resolve: how a new family earns its first row."""


def release_for(version: str | None) -> Release | None:
    if version is None:
        return None
    base = version.split("+", 1)[0]
    found = next((r for r in KNOWN if r.version == base), None)
    if found is None:
        import os

        trial = os.environ.get(TRY_RELEASE)
        found = next((r for r in KNOWN if r.version == trial), None) if trial else None
        family_trial = os.environ.get(TRY_FAMILY)
        if found is None and family_trial:
            name, _, plugin = family_trial.partition("+")
            engine = "v0" if _numbers(base)[:2] <= (0, 10) else "v1"
            found = Release(base, "", name, engine=engine, sim_plugin=plugin == "plugin")
    return found


def installed_engine() -> str:
    """The engine kind the installed vLLM runs ("v0" when none or an unsupported one is
    installed): what a local run's records will be, known before its header arrives."""
    release = release_for(installed_version())
    return release.engine if release is not None else "v0"


def supported_line() -> str:
    return "; ".join(f"{r.version}: {r.install}" for r in SUPPORTED)


_numbers = release_table.numbers


def nearest(version: str) -> Release:
    """The known release closest to `version` (ties: the newer one), for the one line that
    refuses an unsupported vLLM: a user on 0.17.1 is told 0.18.0, one on 0.33.1 0.33.0."""
    width = 4
    target = (_numbers(version) + (0,) * width)[:width]

    def distance(release: Release) -> tuple[int, ...]:
        mine = (_numbers(release.version) + (0,) * width)[:width]
        first = next((i for i in range(width) if mine[i] != target[i]), width)
        if first == width:
            return (0,)
        return (width - first, abs(mine[first] - target[first]), -mine[first])

    return min(KNOWN, key=distance)


def unsupported_line(version: str | None) -> str:
    """Why the installed vLLM cannot be used, in one line that names what to install."""
    if version is None:
        return f"no vLLM is installed; supported: {supported_line()}"
    near = nearest(version)
    why = REFUSED.get(version.split("+", 1)[0])
    return (f"vLLM {version} is not supported{f' ({why})' if why else ''}; the nearest "
            f"supported release is {near.version} ({near.install}); all: "
            f"{', '.join(r.version for r in KNOWN)}")


def require_supported() -> Release:
    """The installed release, or EngineError naming the nearest supported one and its command."""
    version = installed_version()
    release = release_for(version)
    if release is None:
        raise EngineError(unsupported_line(version))
    return release


_family: ModuleType | None = None
_backend: str | None = None  # the backend the family was loaded for (None: not said)


def family(backend: str | None = None) -> ModuleType:
    """The adapter module for the installed vLLM (imports vLLM on first use).

    `backend` ("sim" or "gpu") is given by whoever is about to build or resolve an engine of
    that backend. A family may choose vLLM's platform for it (`check_backend`): 0.10's sim
    needs a platform without a device, and vLLM resolves its platform once per process, so
    the choice is made as the family loads (before its vLLM imports) or, for a family already
    loaded, now; a family raises EngineError for a backend this process can no longer give."""
    global _family, _backend
    if _family is None:
        release = require_supported()
        _backend = backend
        _family = importlib.import_module(
            f"engine.adapters.{release.engine}.family_{release.family}")
    elif backend is not None:
        check = getattr(_family, "check_backend", None)
        if check is not None:
            check(backend)
    return _family


def lacks_full_isl(release: Release) -> bool:
    """Whether `release`'s own scheduler has no full-ISL option (scheduler_reserve_full_isl) to
    run a spec's with: a V1 family without NATIVE_FULL_ISL (0.18; vLLM turns it on by default
    from 0.19). V0 never reads the setting: False. (Family modules import nothing of vLLM at
    their top.)"""
    if release.engine != "v1":
        return False
    return not importlib.import_module(
        f"engine.adapters.v1.family_{release.family}").NATIVE_FULL_ISL


def process_backend() -> str | None:
    """The backend the family is being loaded for (read by a family module as it loads)."""
    return _backend
