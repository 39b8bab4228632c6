"""The process environment a V1 sim engine needs, set only for sim engines.

- `VLLM_TARGET_DEVICE=cpu`: the CUDA wheel on a machine without a GPU cannot infer its platform
  ("Failed to infer device type"); the sim executor runs nothing on it anyway. A release that
  does not read it for its platform (0.18) has its family install vLLM's CpuPlatform instead
  (`install_sim_platform`).
- `VLLM_ENABLE_V1_MULTIPROCESSING=0`: the engine core runs in this process, so the Session's
  hooks see its Scheduler and a step costs no IPC (6,000-7,500 steps/s in the trial).
- `VLLM_DISABLE_REQUEST_ID_RANDOMIZATION=1`: vLLM appends 8 random hex characters to every
  request id; the same spec must give the same decisions, and the records name requests by the
  workload's own ids.
- `PYTHONHASHSEED=0`: vLLM walks sets of request ids (finished requests, and its KV connector's
  jobs), whose order follows `hash()`. It must be set before the interpreter starts, so it is
  checked here, not set: the command line re-executes itself with it (`reexec_for_v1_sim`),
  and engine.child starts its child with it.

vLLM reads the first three lazily (vllm.envs), so setting them before vLLM resolves its platform
(the first engine built, in the observatory's own processes) is enough; a library user who
imported vLLM and touched its platform first is told so in one line.
"""

from __future__ import annotations

import os
import sys

from engine.errors import ConfigError

SIM_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_DISABLE_REQUEST_ID_RANDOMIZATION": "1",
}
HASH_SEED = "0"


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
    os.environ.update(SIM_ENV)
    install_sim_platform()
    platforms = sys.modules.get("vllm.platforms")
    resolved = getattr(platforms, "_current_platform", None) if platforms else None
    if resolved is not None and getattr(resolved, "device_type", "") != "cpu":
        # modules imported since hold that platform: setting the environment now is too late
        raise ConfigError("vLLM was imported and chose its platform before the sim engine "
                          "could set VLLM_TARGET_DEVICE=cpu: set it (and "
                          "VLLM_ENABLE_V1_MULTIPROCESSING=0) before importing vLLM, or build "
                          "the engine first")


def install_sim_platform() -> None:
    """vLLM's CPU platform for this process, where the release does not choose it from
    VLLM_TARGET_DEVICE (0.18 detects CPU only in a CPU build): the family's
    `install_sim_platform`, before anything resolves vLLM's platform. `observatory exec --sim`
    calls it as soon as `vllm.platforms` is imported (engine.attached.api)."""
    from engine.adapters.v1.current import fam

    fam.install_sim_platform()


def child_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a child process that may run a V1 sim engine."""
    return {**env, "PYTHONHASHSEED": HASH_SEED, **SIM_ENV}


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
