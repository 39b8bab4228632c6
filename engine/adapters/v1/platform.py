"""The process environment a V1 sim engine needs, set only for sim engines.

- the platform: the CUDA wheel on a machine without a GPU cannot infer one ("Failed to infer
  device type"), and the sim executor runs nothing on any. Up to 0.33, `VLLM_TARGET_DEVICE=cpu`
  (vLLM's CPU platform). From 0.34 that platform refuses to configure an engine on x86 without
  triton-cpu, which its model runner needs and the sim does not, and 0.24 and 0.27.1 resolve
  their platform while `import vllm` runs, ignoring `VLLM_TARGET_DEVICE`: a release whose
  Release row says `sim_plugin` runs its sim on the observatory's own platform instead, given to
  vLLM the way vLLM takes an out-of-tree platform, a `vllm.platform_plugins` entry point
  (`vllm_platform_plugin` below), with `VLLM_TARGET_DEVICE` left at vLLM's default, `cuda` (an
  explicit `cpu` skips the plugins). The platform is engine.adapters.v1.sim_platform.
  The entry point is not the observatory's package metadata: vLLM lists every plugin of its
  groups in every process that imports it ("Available plugins for group
  vllm.platform_plugins"), and a vLLM the observatory does not watch must see no trace of it.
  It is declared by a distribution of its own, `PLUGIN_PATH` (a directory holding only its
  `.dist-info`), which importlib finds only on a process's path: the observatory puts it
  there in the processes that run a sim engine (`sys.path` in its own, `PYTHONPATH` in those it
  starts) and nowhere else.
  A release that does not choose its platform from `VLLM_TARGET_DEVICE` at all (0.18 detects
  the CPU only in a CPU build) has its family install vLLM's own CpuPlatform instead
  (`install_sim_platform`).
- `VLLM_ENABLE_V1_MULTIPROCESSING=0`: the engine core runs in this process, so the Session's
  hooks see its Scheduler and a step costs no IPC (6,000-7,500 steps/s in the trial).
- `VLLM_DISABLE_REQUEST_ID_RANDOMIZATION=1`: vLLM appends 8 random hex characters to every
  request id; the same spec must give the same decisions, and the records name requests by the
  workload's own ids.
- `VLLM_CACHE_ROOT`, unless the user set it: one per release (`cache_root`). vLLM caches what
  it learns of a model's class in a subprocess that imports vLLM again (seconds), in a file
  named by the class alone, so the venvs of two releases (CI's lanes, a user's) evicted each
  other's entry and every engine build paid the subprocess again.
- `PYTHONHASHSEED=0`: vLLM walks sets of request ids (finished requests, and its KV connector's
  jobs), whose order follows `hash()`. It must be set before the interpreter starts, so it is
  checked here, not set: the command line re-executes itself with it (`reexec_for_v1_sim`),
  and engine.child starts its child with it.

vLLM reads the others lazily (vllm.envs), so setting them before vLLM resolves its platform
(the first engine built, in the observatory's own processes) is enough; a library user who
imported vLLM and touched its platform first is told so in one line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from engine.errors import ConfigError

SIM_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_DISABLE_REQUEST_ID_RANDOMIZATION": "1",
}
"""The sim environment of a release that runs its sim on vLLM's CPU platform (to 0.33)."""
PLUGIN_NAME = "observatory_sim"  # the entry point's name, for VLLM_PLUGINS
PLUGIN_PATH = Path(__file__).with_name("sim_plugin_path")
"""A directory with one distribution's metadata, `vllm_observatory_sim_platform`, whose
`vllm.platform_plugins` entry point is PLUGIN_NAME (`vllm_platform_plugin`): on a process's
path, vLLM finds the sim's platform; off it (everywhere the observatory starts nothing), vLLM
finds no plugin of the observatory's."""
PLUGIN_SIM_ENV = {
    "VLLM_TARGET_DEVICE": "cuda",  # vLLM's default: platform detection consults the plugins
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_DISABLE_REQUEST_ID_RANDOMIZATION": "1",
}
"""The sim environment of a release whose sim runs on the observatory's platform plugin
(beside PYTHONPATH with PLUGIN_PATH: `sim_env`)."""
PLATFORM_KEYS = ("VLLM_TARGET_DEVICE", "PYTHONPATH", "VLLM_PLUGINS")
"""The variables of `sim_env` that choose the sim's platform: what a `vllm serve` started by
hand with the sim executor needs (the others are the observatory's own run settings)."""
SIM_PLATFORM = "engine.adapters.v1.sim_platform.SimCpuPlatform"
HASH_SEED = "0"


def vllm_platform_plugin() -> str:
    """vLLM's `vllm.platform_plugins` entry point: the sim's platform. Reachable only in a
    process whose path holds PLUGIN_PATH, which the observatory gives only to the processes
    that run a sim engine. It imports nothing."""
    return SIM_PLATFORM


def _with_plugin_path(pythonpath: str | None) -> str:
    """PYTHONPATH with PLUGIN_PATH in it (first, once)."""
    parts = [p for p in (pythonpath or "").split(os.pathsep) if p and p != str(PLUGIN_PATH)]
    return os.pathsep.join([str(PLUGIN_PATH), *parts])


def sim_env(release: Any = None, pythonpath: str | None = None) -> dict[str, str]:
    """The environment a sim engine of `release` (default: the installed one) needs, beside
    PYTHONHASHSEED. `pythonpath`: the PYTHONPATH the process will otherwise have (default:
    this one's), which a release on the sim's platform gets with PLUGIN_PATH added."""
    if release is None:
        from engine.adapters.versions import installed_version, release_for

        release = release_for(installed_version())
    if release is None or not release.sim_plugin:
        return dict(SIM_ENV)
    env = dict(PLUGIN_SIM_ENV)
    env["PYTHONPATH"] = _with_plugin_path(pythonpath if pythonpath is not None
                                          else os.environ.get("PYTHONPATH"))
    allowed = os.environ.get("VLLM_PLUGINS")
    if allowed is not None and PLUGIN_NAME not in allowed.split(","):
        env["VLLM_PLUGINS"] = f"{allowed},{PLUGIN_NAME}" if allowed else PLUGIN_NAME
    return env


def _plugin_registered() -> bool:
    """Whether vLLM will find the sim's platform plugin in this process: PLUGIN_PATH on the
    path (`prepare_sim_process` puts it there) and its metadata installed with the package."""
    from importlib.metadata import entry_points

    return any(ep.name == PLUGIN_NAME for ep in entry_points(group="vllm.platform_plugins"))


def hash_seed_fixed() -> bool:
    """Whether this interpreter hashes str deterministically (PYTHONHASHSEED=0 at start)."""
    return sys.flags.hash_randomization == 0


def prepare_sim_process() -> None:
    """Set the V1 sim environment in this process; ConfigError if hashing is randomised."""
    if not hash_seed_fixed():
        raise ConfigError("a V1 sim engine needs PYTHONHASHSEED=0 set before Python starts "
                          "(vLLM walks sets of request ids): run it as "
                          "`PYTHONHASHSEED=0 observatory ...` (the observatory command sets it "
                          "itself)")
    env = sim_env()
    if "PYTHONPATH" in env:
        if str(PLUGIN_PATH) not in sys.path:
            sys.path.append(str(PLUGIN_PATH))  # importlib.metadata reads sys.path at each call
        if not _plugin_registered():
            raise ConfigError(f"this observatory install lacks {PLUGIN_PATH}, the vLLM "
                              f"platform plugin the sim needs on this vLLM: reinstall it "
                              f"(pip install -e . in the clone)")
    os.environ.update(env)
    os.environ.setdefault("VLLM_CACHE_ROOT", cache_root())
    install_sim_platform()
    platforms = sys.modules.get("vllm.platforms")
    resolved = getattr(platforms, "_current_platform", None) if platforms else None
    if resolved is not None and getattr(resolved, "device_type", "") != "cpu":
        # modules imported since hold that platform: setting the environment now is too late
        settings = " and ".join(f"{k}={v}" for k, v in env.items()
                                if k != "VLLM_DISABLE_REQUEST_ID_RANDOMIZATION")
        raise ConfigError(f"vLLM was imported and chose its platform before the sim engine "
                          f"could set its own: set {settings} before importing vLLM, or build "
                          f"the engine first")


def cache_root() -> str:
    """vLLM's cache directory for a sim engine of the installed release: vLLM's own default
    (~/.cache/vllm, or under XDG_CACHE_HOME) with the release's version appended."""
    from engine.adapters.versions import installed_version

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "vllm", f"observatory-{installed_version() or 'none'}")


def install_sim_platform() -> None:
    """vLLM's CPU platform for this process, where the release does not choose it from
    VLLM_TARGET_DEVICE (0.18 detects CPU only in a CPU build): the family's
    `install_sim_platform`, before anything resolves vLLM's platform. `observatory exec --sim`
    calls it as soon as `vllm.platforms` is imported (engine.attached.api)."""
    from engine.adapters.v1.current import fam

    fam.install_sim_platform()


def child_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a child process that may run a V1 sim engine."""
    return {**env, "PYTHONHASHSEED": HASH_SEED, **sim_env(pythonpath=env.get("PYTHONPATH"))}


def reexec_for_v1_sim(argv: list[str]) -> None:
    """Re-execute this command with PYTHONHASHSEED=0 if the installed vLLM runs V1 and hashing
    is randomised (returns only when nothing needs doing). Called before anything else runs."""
    if hash_seed_fixed() or os.environ.get("OBSERVATORY_NO_REEXEC"):
        return
    from engine.adapters.versions import installed_version, release_for

    release = release_for(installed_version())
    if release is None or release.engine != "v1":
        return
    # only the hash seed: the sim environment (a CPU platform) is set by prepare_sim_process for
    # sim engines alone, so a gpu run (or its dry run) still finds its CUDA platform
    env = {**os.environ, "PYTHONHASHSEED": HASH_SEED}
    env["OBSERVATORY_NO_REEXEC"] = "1"  # never loop, whatever the interpreter does
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *argv], env)
