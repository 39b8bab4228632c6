"""Which vLLM releases the observatory speaks, and which adapter family each one uses.

vLLM is an extra of this package, one per supported release (pyproject.toml), so the installed
vLLM is whatever the environment has: ours from `pip install -e '.[vllm050,test]'`, or a verl
environment's own 0.6.3. This module reads the installed version from package metadata without
importing vLLM (a second and more), and turns a missing or unsupported one into one line that
names every supported release and the command that installs it.

Families group releases whose scheduler and engine APIs the hooks treat alike
(engine/adapters/<engine>/family_*.py); `family()` imports the installed release's module.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from engine.errors import EngineError


@dataclass(frozen=True)
class Release:
    version: str  # vllm.__version__ without a local "+..." part
    extra: str  # this package's extra that pins it and its companions
    family: str  # engine.adapters.<engine>.family_<family>
    engine: str = "v0"  # the engine kind this release runs: "v0" (LLMEngine) or "v1" (EngineCore)
    covers: tuple[str, ...] = ()
    """Other releases that resolve to this row's family: each was installed and run through
    bench/v1_releases.py (v1-thrash under off and whole-context, verified), not only read.
    CI runs the row's own release."""
    # The release's wheel pins a package the index lacks: its install needs the clone's
    # overrides/<extra>.txt, which only uv takes (`--override`; pip has no such option).
    override: bool = False
    # Its V1 sim runs on the observatory's own vLLM platform (a platform plugin,
    # engine.adapters.v1.platform), not on vLLM's CPU platform, which from 0.34 refuses to
    # configure any engine on x86 without triton-cpu.
    sim_plugin: bool = False

    @property
    def install(self) -> str:
        if self.override:
            return (f"uv pip install -e '.[{self.extra},test]' "
                    f"--override overrides/{self.extra}.txt")
        return f"pip install -e '.[{self.extra},test]'"


SUPPORTED: tuple[Release, ...] = (
    Release("0.5.0.post1", "vllm050", "v050"),
    Release("0.6.3.post1", "vllm063", "v054_063"),
    Release("0.7.3", "vllm073", "v064_0102"),
    Release("0.10.2", "vllm0102", "v064_0102"),
    Release("0.18.0", "vllm0180", "v018", engine="v1"),
    # 0.27.1 (#53130 was filed against it) reads as 0.29 for everything the observatory
    # touches, but resolves its platform while `import vllm` runs (torch_utils' PIN_MEMORY) and
    # ignores VLLM_TARGET_DEVICE: without a GPU that is UnspecifiedPlatform ("Device string must
    # not be empty"), so its sim runs on the platform plugin, which vLLM consults even there.
    Release("0.27.1", "vllm0271", "v029", engine="v1", sim_plugin=True),
    Release("0.29.0", "vllm0290", "v029", engine="v1"),
    Release("0.33.0", "vllm033", "v033", engine="v1", covers=("0.31.0", "0.32.0")),
    Release("0.34.0", "vllm034", "v034", engine="v1", override=True, sim_plugin=True),
)
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
"""bench/v1_releases.py sets it to a supported release's version to try an installed vLLM
that no row covers yet with that row's family (how a release earns its place in `covers`)."""


def release_for(version: str | None) -> Release | None:
    if version is None:
        return None
    base = version.split("+", 1)[0]
    found = next((r for r in SUPPORTED if r.version == base or base in r.covers), None)
    if found is None:
        import os

        trial = os.environ.get(TRY_RELEASE)
        found = next((r for r in SUPPORTED if r.version == trial), None) if trial else None
    return found


def installed_engine() -> str:
    """The engine kind the installed vLLM runs ("v0" when none or an unsupported one is
    installed): what a local run's records will be, known before its header arrives."""
    release = release_for(installed_version())
    return release.engine if release is not None else "v0"


def supported_line() -> str:
    return "; ".join(f"{r.version}: {r.install}" for r in SUPPORTED)


def _numbers(version: str) -> tuple[int, ...]:
    """`0.6.3.post1` -> (0, 6, 3, 1): enough order to find the nearest release."""
    parts = []
    for piece in version.split("+", 1)[0].replace("post", "").replace("rc", ".").split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def nearest(version: str) -> Release:
    """The supported release closest to `version` (ties: the newer one), for the one line that
    refuses an unsupported vLLM: a user on 0.17.1 is told 0.18.0, one on 0.30.1 0.29.0."""
    width = 4
    target = (_numbers(version) + (0,) * width)[:width]

    def distance(release: Release) -> tuple[int, ...]:
        mine = (_numbers(release.version) + (0,) * width)[:width]
        first = next((i for i in range(width) if mine[i] != target[i]), width)
        if first == width:
            return (0,)
        return (width - first, abs(mine[first] - target[first]), -mine[first])

    return min(SUPPORTED, key=distance)


def unsupported_line(version: str | None) -> str:
    """Why the installed vLLM cannot be used, in one line that names what to install."""
    if version is None:
        return f"no vLLM is installed; supported: {supported_line()}"
    near = nearest(version)
    return (f"vLLM {version} is not supported; the nearest supported release is "
            f"{near.version} ({near.install}); all: {', '.join(r.version for r in SUPPORTED)}")


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


def process_backend() -> str | None:
    """The backend the family is being loaded for (read by a family module as it loads)."""
    return _backend
