"""The V1 Scheduler someone else's engine built (`observatory exec`, `engine.attach`,
`--scheduler-cls engine.ObservedScheduler`): every vLLM name the attached mode needs on V1.

V1 runs its scheduler inside the EngineCore, often in a process of its own (`vllm serve`,
`LLM` with multiprocessing), so the attached mode works at the Scheduler, not the engine:

- `patch_scheduler_class(on_scheduler)`: vLLM's `Scheduler.__init__` calls
  `on_scheduler(scheduler)` when it returns, in whatever process builds one.
- `install_sim()`: every engine built from then on gets the sim executor as its
  `distributed_executor_backend` (a dotted path, importable in the EngineCore process too).
- `V1Tap`: one Scheduler, watched. The hook (engine.adapters.v1.hooks) wraps `schedule`,
  `_preempt_request` and, while a policy rule needs it, its KV manager's `allocate_slots`; the
  tap adds `schedule` (a step
  begins), `update_from_output` (the step's outcome: it ends) and `add_request` (arrivals),
  all on the instance, and builds each step's record (engine.adapters.v1.step_record).
  `exec_s` is 0: the executor belongs to the EngineCore, which the tap does not see.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from engine.adapters.guard import Guard
from engine.adapters.v1.current import fam
from engine.adapters.v1 import hooks as v1_hooks
from engine.adapters.v1.request_facts import RequestFactsReader
from engine.adapters.v1.step_record import StepReader, abort_state
from engine.costmodel import CostModel
from engine.policy import Policy

_MARK = "_observatory_tap"
SIM_GPU_BLOCKS = 8192  # as the V0 sim's default: 131,072 tokens in blocks of 16


def scheduler_class() -> type:
    from vllm.v1.core.sched.scheduler import Scheduler

    return Scheduler


def patch_scheduler_class(on_scheduler: Callable[[Any], None]) -> None:
    """Call `on_scheduler(scheduler)` after every V1 `Scheduler.__init__` (idempotent)."""
    cls = scheduler_class()
    init = cls.__init__
    if getattr(init, "_observatory", False):
        return

    @functools.wraps(init)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if not is_tapped(self):
            on_scheduler(self)

    __init__._observatory = True  # type: ignore[attr-defined]
    cls.__init__ = __init__


def is_tapped(scheduler: Any) -> bool:
    return _MARK in vars(scheduler)


def install_sim() -> None:
    """Every V1 engine built after this runs the sim executor (no model, no GPU)."""
    from vllm.engine.arg_utils import EngineArgs

    from engine.adapters.v1.sim_executor import DOTTED_PATH

    create = EngineArgs.create_engine_config
    if getattr(create, "_observatory", False):
        return

    @functools.wraps(create)
    def create_engine_config(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.distributed_executor_backend = DOTTED_PATH
        self.enforce_eager = True
        if getattr(self, "num_gpu_blocks_override", None) is None:
            # the sim reports no real memory: without this vLLM sizes the pool from a nominal
            # free memory (a billion tokens for a tiny model) and takes minutes building it
            self.num_gpu_blocks_override = SIM_GPU_BLOCKS
        return create(self, *args, **kwargs)

    create_engine_config._observatory = True  # type: ignore[attr-defined]
    EngineArgs.create_engine_config = create_engine_config


def is_scheduler(target: Any) -> bool:
    return isinstance(target, scheduler_class())


class V1Tap:
    """One V1 Scheduler with the observatory's hook and its steps heard."""

    kind = "v1"

    def __init__(self, scheduler: Any, policy: Policy, guard: Guard) -> None:
        import vllm

        self.scheduler = scheduler
        self.guard = guard
        self.hook = v1_hooks.attach(scheduler, policy)
        originals = self.hook._originals
        guard.wrap(scheduler, "schedule", originals)
        guard.wrap(scheduler, "_preempt_request", originals)
        manager = fam.kv_cache_manager(scheduler)  # the rules' wrapper, guarded, goes on and
        manager.allocate_slots = self.hook.allocate_entry  # off with the policy (sync_policy)
        guard.wrap(manager, "allocate_slots", originals)
        self.hook.allocate_entry = vars(manager)["allocate_slots"]
        self.hook.sync_policy()
        self.reader = StepReader(scheduler)
        self.vllm_version = vllm.__version__
        config = getattr(scheduler, "vllm_config", None)
        model_config = getattr(config, "model_config", None)
        self.model = str(getattr(model_config, "model", "?"))
        self.engine_config: dict[str, Any] = {}
        if config is not None:
            from engine.adapters.build_shared import summarize_config

            self.engine_config = summarize_config(config)
        self._finished: list[str] = []
        self.facts = RequestFactsReader(fam.block_size(scheduler), fam.total_blocks(scheduler))
        self._wrapped: list[str] = []
        self.on_shutdown: Callable[[], None] | None = None  # the observer's close
        vars(scheduler)[_MARK] = self

    def hear(self, before_step: Callable[[], None], after_step: Callable[[], None],
             aborted: Callable[[BaseException], None],
             added: Callable[[str, int, Any], None]) -> None:
        scheduler = self.scheduler
        self._saved = {name: vars(scheduler)[name] for name in ("update_from_output",
                                                                "add_request", "shutdown")
                       if name in vars(scheduler)}  # the program's own wrappers, if any
        schedule = scheduler.schedule  # the guarded hook
        update = scheduler.update_from_output
        add = scheduler.add_request
        guard = self.guard

        def observed_schedule(*args: Any, **kwargs: Any) -> Any:
            if not guard.broken:
                before_step()
            return schedule(*args, **kwargs)

        def observed_update(*args: Any, **kwargs: Any) -> Any:
            out = update(*args, **kwargs)
            if not guard.broken:
                try:
                    self._finished = _finished_ids(out)
                except Exception as exc:  # noqa: BLE001
                    guard.fail(exc)
                    return out
                after_step()
            return out

        def observed_add(request: Any, *args: Any, **kwargs: Any) -> Any:
            out = add(request, *args, **kwargs)
            if not guard.broken:
                try:
                    facts = self.facts.arrived(request)
                except Exception as exc:  # noqa: BLE001  our code: never into vLLM's add
                    guard.fail(exc)
                    return out
                added(fam.request_id(request), int(request.num_prompt_tokens), facts)
            return out

        shutdown = scheduler.shutdown

        def observed_shutdown(*args: Any, **kwargs: Any) -> Any:
            # the EngineCore process ends without running atexit: end the stream here
            on_shutdown = self.on_shutdown
            if on_shutdown is not None:
                try:
                    on_shutdown()
                except Exception:  # noqa: BLE001  never in the way of vLLM's shutdown
                    pass
            return shutdown(*args, **kwargs)

        scheduler.schedule = observed_schedule
        scheduler.update_from_output = observed_update
        scheduler.add_request = observed_add
        scheduler.shutdown = observed_shutdown
        self._wrapped += ["update_from_output", "add_request", "shutdown"]

    def record(self, step: int, cost: CostModel, sim_start_s: float, wall_s: float) -> Any:
        finished = self._finished
        return self.reader.build(step, self.hook.current, cost, sim_start_s, wall_s,
                                 finished, None,
                                 self.facts.finished_lens(finished) if finished else None)

    def abort_state(self) -> dict[str, int]:
        return abort_state(self.scheduler)

    def detach(self) -> None:
        """Put vLLM's own methods back."""
        self.guard.broken = True
        self.hook.detach()
        for name in self._wrapped:
            vars(self.scheduler).pop(name, None)
        vars(self.scheduler).update(getattr(self, "_saved", {}))
        vars(self.scheduler).pop(_MARK, None)
        self._wrapped.clear()


def _finished_ids(outputs: Any) -> list[str]:
    """The requests `update_from_output` finished: its EngineCoreOutputs per client."""
    finished: list[str] = []
    if not isinstance(outputs, dict):
        return finished
    for per_client in outputs.values():
        for output in getattr(per_client, "outputs", ()) or ():
            if getattr(output, "finish_reason", None) is not None:
                finished.append(output.request_id)
    return finished


def observed_scheduler_class(on_scheduler: Callable[[Any], None]) -> type:
    """vLLM's V1 Scheduler, attached as it is built (`--scheduler-cls
    engine.ObservedScheduler`): `on_scheduler(self)` runs at the end of its `__init__`."""
    base = scheduler_class()

    class ObservedScheduler(base):  # type: ignore[misc, valid-type]
        """vLLM's V1 Scheduler with the observatory attached (OBSERVATORY_* environment)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if not is_tapped(self):
                on_scheduler(self)

    ObservedScheduler.__module__ = "engine"
    ObservedScheduler.__qualname__ = "ObservedScheduler"
    return ObservedScheduler
