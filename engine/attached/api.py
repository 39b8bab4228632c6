"""Watch the engines someone else's program builds: `engine.attach(...)`,
`engine.ObservedScheduler`, and what `observatory exec` installs in every process.

- `attach(target, policy=..., serve=..., token=..., record=...)`: a V0 `LLM`, `LLMEngine`,
  `AsyncLLMEngine` or `Scheduler`, or a V1 `Scheduler`; returns a Handle (`close()`,
  `set_policy()`). Without `serve` and `record` it only hooks the scheduler and builds each
  step's record in memory: no file, no socket, no thread.
- `ObservedScheduler`: vLLM's V1 Scheduler that attaches itself as it is built, configured by
  the OBSERVATORY_* environment (engine.attached.env), for `--scheduler-cls` and
  `LLM(scheduler_cls=...)`, whose flag takes no arguments.
- `install_from_env()`: what `observatory exec`'s sitecustomize runs once vLLM is imported:
  every engine built in the process from then on is attached (and runs the sim with `--sim`).

Each engine is one stream named host/pid/index (engine.attached.registry).
"""

from __future__ import annotations

from typing import Any

from engine.adapters.attach import (install_at_import, install_sim_at_args,
                                    install_sim_platforms, sim_executor_class, tap_for)
from engine.adapters.driver import AttachedTap
from engine.adapters.guard import Guard
from engine.adapters.policy_support import installed
from engine.attached import env as attach_env
from engine.attached import registry
from engine.attached.observer import Observer
from engine.errors import ConfigError
from engine.policy import Policy, parse_policy, require_engine_kind, require_policy


class Handle:
    """One attached engine: its stream (`observer`), its policy, and `close()`."""

    def __init__(self, tap: AttachedTap | _SchedulerOnly, observer: Observer | None) -> None:
        self.tap = tap
        self.observer = observer
        self.hook = tap.hook

    @property
    def name(self) -> str | None:
        return self.observer.name if self.observer is not None else None

    @property
    def policy(self) -> Policy:
        return self.hook.policy

    @property
    def address(self) -> str | None:
        """Where its stream is served (HOST:PORT), if it is."""
        server = self.observer.server if self.observer is not None else None
        return server.address if server is not None else None

    def set_policy(self, policy: str | Policy, source: str = "api") -> None:
        """Govern the engine's next step with `policy` (any thread)."""
        policy = parse_policy(policy)
        require_engine_kind(policy, self.tap.kind)
        self.hook.set_policy(policy, source)  # and what this engine can take (the hook asks)

    def close(self) -> None:
        """End the stream (the recording gets its end record) and give vLLM its own methods
        back."""
        if self.observer is not None:
            self.observer.close()
            registry.forget(self.observer)
        self.tap.detach()


def attach(target: Any, policy: str | Policy = "off", *, serve: str | None = None,
           token: str | None = None, record: str | None = None,
           sim: bool = False) -> Handle:
    """Attach the observatory to `target` (see the module docstring). Raises ConfigError for
    a target it does not know and for a serve address off this host without a token."""
    policy = parse_policy(policy)
    address = attach_env.parse_serve(serve, token) if serve else None
    from engine.adapters.versions import require_supported

    require_policy(policy, installed(require_supported().engine))  # before anything is hooked
    tap, _ = _tap(target, policy)
    if tap is None:
        raise ConfigError(f"engine.attach: cannot watch a {type(target).__name__}: give a V0 "
                          f"LLM, LLMEngine, AsyncLLMEngine or Scheduler, or a V1 Scheduler")
    return _observe(tap, policy, address=address, token=token, record=record, sim=sim)


def _tap(target: Any, policy: Policy) -> tuple[AttachedTap | _SchedulerOnly | None, str]:
    from engine.adapters.versions import require_supported

    kind = require_supported().engine
    guard = Guard(lambda exc: None)
    tap, scheduler_hook = tap_for(target, policy, guard)
    if scheduler_hook is not None:
        return _SchedulerOnly(scheduler_hook, guard), kind
    return tap, kind


class _SchedulerOnly:
    """A bare V0 Scheduler: its policy, no records (they need the engine's step)."""

    kind = "v0"

    def __init__(self, hook: Any, guard: Guard) -> None:
        self.hook = hook
        self.guard = guard

    def detach(self) -> None:
        self.guard.broken = True
        self.hook.detach()


def _observe(tap: AttachedTap | _SchedulerOnly, policy: Policy, *,
             address: tuple[str, int] | None, token: str | None, record: str | None,
             sim: bool) -> Handle:
    if isinstance(tap, _SchedulerOnly):
        if address or record:
            raise ConfigError("engine.attach: a bare V0 Scheduler takes a policy only; attach "
                              "its LLM or LLMEngine to record or serve its steps")
        return Handle(tap, None)
    index = registry.next_index()
    name = registry.engine_name(index)
    path = registry.record_path(record, index) if record else None
    observer = Observer(tap, name, record=path, sim=sim, warn=registry.warn_once)
    tap.guard._on_failure = lambda exc: observer.fail("a scheduler hook", exc)
    tap.hear(observer.before_step, observer.after_step, observer.aborted, observer.added)
    if hasattr(tap, "on_shutdown"):
        tap.on_shutdown = observer.close  # V1: vLLM shuts its scheduler down
    if address is not None:
        registry.serve(observer, address, token)
    observer.start()
    if path is not None or address is not None:  # a stream someone reads: end it at exit
        registry.remember(observer)
    return Handle(tap, observer)


# ---- observatory exec and ObservedScheduler ------------------------------------------------

def attach_from_env(target: Any) -> Handle | None:
    """Attach `target` (an engine, or a V1 Scheduler) as the OBSERVATORY_* environment says.
    Never raises: a failure is one warning and the engine runs unwatched."""
    try:
        config = attach_env.from_env()
        policy = parse_policy(config.policy)
        tap, _ = _tap(target, policy)
        if tap is None:
            return None
        return _observe(tap, policy, address=config.serve, token=config.token,
                        record=config.record, sim=config.sim)
    except Exception as exc:  # noqa: BLE001  never harm the user's engine
        registry.warn_once(f"could not attach to this engine "
                           f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                           f"); vLLM runs on unwatched")
        return None


def install_from_env(kind: str) -> None:
    """Called once vLLM's engine (V0) or scheduler (V1) module is imported in a process run
    by `observatory exec`: attach every engine built from now on."""
    config = attach_env.from_env()
    if kind == "args":
        # V1's sim executor goes in as EngineArgs makes the config: vLLM 0.29's `LLM` and
        # `vllm serve` make it before anything imports the scheduler module (0.33's import it
        # first), so waiting for the "v1" trigger would leave their engine on vLLM's own
        # executor, which cannot start here (0.18's `LLM` builds it that way too). V0 puts its
        # sim in at its engine ("v0").
        if config.sim:
            install_sim_at_args()
        return
    if kind == "platform":
        if config.sim:
            install_sim_platforms()
        return
    install_at_import(kind, config.sim, attach_from_env)


def __getattr__(name: str) -> Any:
    if name == "ObservedScheduler":
        from engine.adapters.v1.attach import observed_scheduler_class

        cls = observed_scheduler_class(attach_from_env)
        globals()[name] = cls
        return cls
    if name == "SimExecutor":
        SimExecutor = sim_executor_class()
        globals()[name] = SimExecutor
        return SimExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
