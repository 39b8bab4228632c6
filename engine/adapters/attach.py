"""Which kind's attach module serves the installed release (engine.adapters.v0.attach or
engine.adapters.v1.attach): the tap on a user's engine, the sim put in under `observatory exec`,
the sim executor. engine.attached asks here, as a session asks `driver.open_driver`, so the
choice of a kind's module stays beside the kinds' modules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.adapters.driver import AttachedTap
from engine.adapters.guard import Guard
from engine.errors import ConfigError
from engine.policy import Policy


def tap_for(target: Any, policy: Policy, guard: Guard) -> tuple[AttachedTap | None, Any]:
    """The installed kind's tap on `target` (a V0 LLM, LLMEngine or AsyncLLMEngine, or a V1
    Scheduler) as (tap, None); for a bare V0 Scheduler, (None, its policy hook); (None, None)
    for anything else. ConfigError when the V1 scheduler is already attached."""
    from engine.adapters.versions import require_supported

    if require_supported().engine == "v1":
        from engine.adapters.v1 import attach as v1

        if not v1.is_scheduler(target):
            return None, None
        if v1.is_tapped(target):
            raise ConfigError("engine.attach: this scheduler is already attached")
        return v1.V1Tap(target, policy, guard), None
    from engine.adapters.v0 import attach as v0

    engine = v0.engine_of(target)
    if engine is not None:
        return v0.V0Tap(engine, policy, guard), None
    if v0.is_scheduler(target):
        return None, v0.scheduler_hook(target, policy, guard)
    return None, None


def install_sim_at_args() -> None:
    """The V1 sim executor, put in as EngineArgs makes the config (V0 puts its sim in at its
    engine: nothing here)."""
    from engine.adapters.versions import installed_engine

    if installed_engine() == "v1":
        from engine.adapters.v1 import attach as v1

        v1.install_sim()


def install_sim_platforms() -> None:
    """The sim platform, V0's and on a V1 release V1's too."""
    from engine.adapters.v0 import attach as v0

    v0.install_sim_platform()
    from engine.adapters.versions import installed_engine

    if installed_engine() == "v1":
        from engine.adapters.v1.platform import install_sim_platform

        install_sim_platform()


def install_at_import(trigger: str, sim: bool, attach: Callable[[Any], Any]) -> None:
    """vLLM's engine module ("v0") or its scheduler module ("v1") is imported: put the sim in
    (when `sim`) and patch the class so that every engine built from now on is `attach`ed."""
    if trigger == "v0":
        from engine.adapters.v0 import attach as v0

        if sim:
            v0.install_sim()
        v0.patch_engine_class(attach)
    else:
        from engine.adapters.v1 import attach as v1

        if sim:
            v1.install_sim()
        v1.patch_scheduler_class(attach)


def sim_executor_class() -> type:
    """The installed kind's SimExecutor."""
    from engine.adapters.versions import require_supported

    if require_supported().engine == "v1":
        from engine.adapters.v1.sim_executor import SimExecutor
    else:
        from engine.adapters.v0.sim_executor import SimExecutor
    return SimExecutor
