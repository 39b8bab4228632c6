"""One uv venv per vLLM release, built once into a cache directory outside the clone and
reused after: the observatory's clone (editable) and that release's vLLM with its pins.

Keyed like .ci/venv (.ci/venv_key.py): a hash of what decides the venv's contents
(requires-python, the base and test dependencies, the release's requirements and its override
file), so a release whose CI line has a venv in the same root (OBSERVATORY_VENV_ROOT, CI's
~/.cache/vllm-observatory) is that venv, and an edit elsewhere in pyproject.toml rebuilds
nothing. A venv counts only once its install finished (`.complete`, as .ci/venv). The runs
put this clone first on PYTHONPATH, so a venv built from another clone runs this one's code.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from engine.adapters.versions import Release
from engine.errors import ConfigError, EngineError

CLONE = Path(__file__).resolve().parents[2]


def default_root() -> Path:
    """Where the venvs live: OBSERVATORY_VENV_ROOT (as .ci/venv), else
    ~/.cache/vllm-observatory."""
    given = os.environ.get("OBSERVATORY_VENV_ROOT")
    return Path(given) if given else Path.home() / ".cache" / "vllm-observatory"


def _project() -> dict:
    import tomllib

    pyproject = CLONE / "pyproject.toml"
    if not pyproject.is_file():
        raise ConfigError("observatory releases installs this observatory's clone into each "
                          "release's venv, and this install has no clone (no pyproject.toml "
                          f"beside {CLONE / 'engine'}): run it from a clone "
                          "(git clone ...; pip install -e .)")
    return tomllib.loads(pyproject.read_text())["project"]


def requirements(release: Release) -> tuple[list[str], list[str]]:
    """(what `uv pip install` is given beside the clone, the `--override` arguments)."""
    if release.extra:
        override = CLONE / "overrides" / f"{release.extra}.txt"
        return [], (["--override", str(override)] if override.exists() else [])
    return [f"vllm=={release.version}", *release.pins], []


def venv_name(release: Release) -> str:
    """`venv-<extra>-<16 hex>` for a CI line (the very name .ci/venv gives it), else
    `venv-vllm-<version>-<16 hex>`."""
    project = _project()
    extras = project["optional-dependencies"]
    content = [project["requires-python"], project["dependencies"], extras["test"]]
    if release.extra:
        content.append(extras[release.extra])
        override = CLONE / "overrides" / f"{release.extra}.txt"
        if override.exists():
            content.append(override.read_text())
        label = release.extra
    else:
        content.append(requirements(release)[0])
        label = f"vllm-{release.version}"
    digest = hashlib.sha256(json.dumps(content).encode()).hexdigest()[:16]
    return f"venv-{label}-{digest}"


def python_of(release: Release, root: Path) -> Path:
    return root / venv_name(release) / "bin" / "python"


def ready(release: Release, root: Path) -> bool:
    return (root / venv_name(release) / ".complete").is_file()


def _uv(root: Path, say) -> str:
    found = shutil.which("uv")
    if found:
        return found
    tool = root / "uv-tool" / "bin" / "uv"  # where .ci/venv keeps its own
    if not tool.exists():
        say(f"installing uv into {root / 'uv-tool'} (once)")
        root.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "venv", str(root / "uv-tool")],
                              capture_output=True, text=True)
        if done.returncode == 0:
            done = subprocess.run([str(root / "uv-tool" / "bin" / "python"), "-m", "pip",
                                   "install", "--quiet", "uv>=0.9,<1"],
                                  capture_output=True, text=True)
        if done.returncode != 0:
            raise EngineError(f"cannot install uv into {root / 'uv-tool'}: "
                              f"{_last_line(done)} (pip install uv, then run again)")
    return str(tool)


def _last_line(done: subprocess.CompletedProcess) -> str:
    lines = [line.strip() for line in (done.stderr or done.stdout or "").splitlines()
             if line.strip()]
    found = next((line for line in lines if "because" in line or "error" in line.lower()),
                 None)
    return (found or (lines[-1] if lines else f"exit {done.returncode}"))[:240]


def ensure(release: Release, root: Path, say=lambda line: None) -> Path:
    """The python of `release`'s venv under `root`, built first if it is not there (minutes:
    uv fetches the release's wheels, and a new torch, once into its cache); EngineError in
    one line when the install fails."""
    venv = root / venv_name(release)
    python = venv / "bin" / "python"
    if (venv / ".complete").is_file():
        return python
    uv = _uv(root, say)
    say(f"building the venv of vLLM {release.version} in {venv} (once; minutes)")
    shutil.rmtree(venv, ignore_errors=True)
    extra, override = requirements(release)
    target = f"{CLONE}[{release.extra},test]" if release.extra else f"{CLONE}[test]"
    for argv in ([uv, "venv", "--quiet", "--seed", "-p", sys.executable, str(venv)],
                 [uv, "pip", "install", "--quiet", "-p", str(python), "-e", target, *extra,
                  *override]):
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            raise EngineError(f"cannot build the venv of vLLM {release.version}: "
                              f"{_last_line(done)}")
    (venv / ".complete").touch()
    return python
