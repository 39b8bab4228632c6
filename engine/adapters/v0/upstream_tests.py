"""vLLM's own scheduler tests, run on the installed release with the observatory attached.

Why: the hooks must be invisible under ``off`` (vLLM's tests pass and fail exactly as on bare
vLLM), and a policy that acts must change only the tests whose assertions it contradicts. The
tests come from the release's sdist on PyPI (it ships `tests/`), pinned by URL and sha256 and
cached outside the clone (`sdist_cache()`), so every run tests the same files; a machine that
cannot reach PyPI raises `SdistUnavailable` and the callers skip.

`run(policy)` runs `TEST_FILES` in a fresh pytest process (the plugin
engine.adapters.v0.upstream_plugin attaches `hooks.attach(scheduler, policy)` to every Scheduler
the tests build; policy None is bare vLLM) and returns each test's outcome.
bench/upstream_scheduler_tests.py prints what changes under each policy;
tests/test_upstream_scheduler_tests.py holds docs/versions.md's list to it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from engine.adapters.versions import installed_version
from engine.errors import EngineError

REPO = Path(__file__).resolve().parents[3]

# release -> (sdist URL on PyPI, its sha256)
SDISTS: dict[str, tuple[str, str]] = {
    "0.5.0.post1": (
        "https://files.pythonhosted.org/packages/5e/0e/8dea24dad65fe9ab4ba310794a0a7742fcf21dd32c0"
        "248e428098b61203e/vllm-0.5.0.post1.tar.gz",
        "e4a19889d95f6896ca89655f64ffc9361f44e66a8e9f086748aa989031571a23"),
    "0.6.3.post1": (
        "https://files.pythonhosted.org/packages/a8/e4/aa15731375a16d701331c54fe6024d1ed165777a6bd"
        "c29a587a5d77a5713/vllm-0.6.3.post1.tar.gz",
        "0aae6ddd5348f86bf20e4f323c09e77d5ad2638d77f0d69323c5a63a40f8c143"),
    "0.7.3": (
        "https://files.pythonhosted.org/packages/f5/73/87825ee293f0e721eb8aadbd0cf9c3436d4e3b34583"
        "22878f1f6e7398a0d/vllm-0.7.3.tar.gz",
        "841cc30bd4ffbc037e8b8bf6dbacbedc60cc0b2abb60366873b185159a1204e6"),
    "0.10.2": (
        "https://files.pythonhosted.org/packages/7d/0a/278d7bbf454f7de5322a5007427eed3e8b34ed6c280"
        "2491b56bbdfd7bbb4/vllm-0.10.2.tar.gz",
        "57608f44cf61f5d80fb182c98e06e524cb2925bb528258a7b247c8e43a52d13e"),
}
# release -> why its tests/conftest.py is not loaded (pytest --confcutdir tests/core: the
# scheduler tests need none of its fixtures)
NO_TOP_CONFTEST: dict[str, str] = {
    "0.10.2": "it imports tblib, a test dependency of vLLM's that the observatory's venv lacks",
}
TEST_FILES = ("tests/core/test_scheduler.py", "tests/core/test_chunked_prefill_scheduler.py")
POLICIES = ("off", "strict", "watermark", "reserve")
BARE = None  # run(BARE): vLLM without the observatory


class SdistUnavailable(EngineError):
    """The release's sdist cannot be had (no network, no pinned sdist for this release)."""


@dataclass(frozen=True)
class Outcome:
    outcome: str  # passed, failed, skipped or error
    line: str = ""  # the failure's message, first line


def sdist_cache() -> Path:
    """Where sdists and their extracted tests are kept: outside any clone, shared by runs."""
    base = os.environ.get("OBSERVATORY_SDIST_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "vllm-observatory" / "sdists"


def tests_tree(version: str | None = None) -> Path:
    """The release's extracted `tests/` (with a pytest.ini that makes it its own rootdir),
    downloading and checking its sdist first if the cache does not have it."""
    version = version or installed_version() or ""
    if version not in SDISTS:
        raise SdistUnavailable(f"no pinned sdist for vLLM {version!r}: the scheduler tests are "
                               f"pinned for {', '.join(SDISTS)}")
    url, sha256 = SDISTS[version]
    cache = sdist_cache()
    tree = cache / f"vllm-{version}"
    if (tree / "pytest.ini").exists():
        return tree
    cache.mkdir(parents=True, exist_ok=True)
    tarball = cache / url.rsplit("/", 1)[1]
    if not tarball.exists() or _sha256(tarball) != sha256:
        _download(url, sha256, tarball)
    staging = Path(tempfile.mkdtemp(prefix=f"vllm-{version}-", dir=cache))
    try:
        prefix = f"vllm-{version}/tests/"
        with tarfile.open(tarball) as archive:
            members = [m for m in archive.getmembers()
                       if m.name.startswith(prefix) and (m.isfile() or m.isdir())]
            for member in members:
                member.name = member.name[len(f"vllm-{version}/"):]
            archive.extractall(staging, members=members)
        (staging / "pytest.ini").write_text("[pytest]\n")
        try:
            staging.rename(tree)  # atomic: a concurrent run either sees all of it or none
        except OSError:
            if not (tree / "pytest.ini").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return tree


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _download(url: str, sha256: str, dest: Path) -> None:
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            data = response.read()
    except OSError as exc:
        raise SdistUnavailable(f"cannot download {url}: {exc}") from exc
    if hashlib.sha256(data).hexdigest() != sha256:
        raise SdistUnavailable(f"{url} does not have the pinned sha256 {sha256}")
    partial = dest.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(dest)


def run(policy: str | None, version: str | None = None,
        python: str = sys.executable) -> dict[str, Outcome]:
    """Each test's outcome in `TEST_FILES` of the release's own tests, with the observatory
    attached under `policy` to every Scheduler (None: not attached, bare vLLM)."""
    tree = tests_tree(version)
    files = [f for f in TEST_FILES if (tree / f).exists()]
    with tempfile.TemporaryDirectory() as scratch:
        outcomes = Path(scratch) / "outcomes.json"
        command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "-c", str(tree / "pytest.ini"), "--rootdir", str(tree),
                   "-p", "engine.adapters.v0.upstream_plugin",
                   "--observatory-outcomes", str(outcomes), *files]
        if policy is not None:
            command += ["--observatory-policy", policy]
        if (version or installed_version()) in NO_TOP_CONFTEST:
            command += ["--confcutdir", str(tree / "tests" / "core")]
        env = dict(os.environ, PYTHONPATH=str(REPO), VLLM_USE_V1="0")
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True,
                              timeout=900)
        if not outcomes.exists():
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            raise EngineError(f"vLLM's scheduler tests did not run (exit {done.returncode}): "
                              + " | ".join(tail))
        raw = json.loads(outcomes.read_text())
    return {nodeid: Outcome(*value) for nodeid, value in raw.items()}


def changed(bare: dict[str, Outcome], other: dict[str, Outcome]) -> dict[str, tuple[str, str]]:
    """{test: (bare outcome, outcome with the policy)} for every test whose outcome differs."""
    names = sorted(set(bare) | set(other))
    missing = Outcome("missing")
    return {name: (bare.get(name, missing).outcome, other.get(name, missing).outcome)
            for name in names
            if bare.get(name, missing).outcome != other.get(name, missing).outcome}
