"""The V0 engine someone else built and drives (`observatory exec`, `engine.attach`): every
vLLM name the attached mode needs on V0 (0.5.0.post1 to 0.10.2).

- `patch_engine_class(on_engine)`: vLLM's `LLMEngine.__init__` calls `on_engine(engine)` when it
  returns, for every engine the process builds (`LLM`, `LLMEngine`, and `AsyncLLMEngine`, whose
  engine is an `LLMEngine` subclass).
- `install_sim()`: every engine built from then on runs the observatory's sim executor (the
  executor class given to `LLMEngine.__init__` is replaced, whatever picked it) with the sim's
  engine arguments (the family's device, no async output processing, eager).
- `V0Tap`: one engine, watched: the scheduler hook (engine.adapters.v0.hooks), the executor
  timer, the engine's `step` / `step_async` / `add_request` wrapped on the instance so the
  observer hears each step end and each request arrive, and the step record
  (engine.adapters.v0.step_record).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from engine.adapters import exec_timing
from engine.adapters.guard import Guard
from engine.adapters.v0 import exit_cancel, hooks as vllm_hooks
from engine.adapters.v0.request_facts import RequestFactsReader, added_groups
from engine.adapters.v0.step_record import abort_state, build_step_record
from engine.costmodel import CostModel
from engine.policy import Policy

SIM_GPU_BLOCKS = 8192  # the sim executor's GPU blocks unless the engine overrides them


def patch_engine_class(on_engine: Callable[[Any], None]) -> None:
    """Call `on_engine(engine)` after every `LLMEngine.__init__` (idempotent). Runs as soon as
    vLLM's engine module is imported, maybe while `vllm` itself is still importing: it
    touches nothing else of vLLM until an engine is built."""
    from vllm.engine.llm_engine import LLMEngine

    init = LLMEngine.__init__
    if getattr(init, "_observatory", False):
        return

    @functools.wraps(init)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if _sim["on"] and "executor_class" in kwargs:
            kwargs["executor_class"] = _sim_executor()
        init(self, *args, **kwargs)
        on_engine(self)

    __init__._observatory = True  # type: ignore[attr-defined]
    LLMEngine.__init__ = __init__


_sim: dict[str, Any] = {"on": False, "class": None, "gpu_blocks": SIM_GPU_BLOCKS, "seed": 0}


def _sim_executor() -> type:
    """The sim executor class, made on first use (when vLLM is whole)."""
    if _sim["class"] is None:
        from engine.adapters.v0.sim_executor import SimExecutor

        base = SimExecutor.configured(_sim["gpu_blocks"], None, _sim["seed"], 0.0)

        async def execute_model_async(self: Any, execute_model_req: Any) -> Any:
            return self.execute_model(execute_model_req)

        async def nothing_async(self: Any, *args: Any, **kwargs: Any) -> None:
            return None

        # AsyncLLMEngine awaits these on its executor; the sim answers at once
        _sim["class"] = type("SimExecutor", (base,), {
            "execute_model_async": execute_model_async,
            "check_health_async": nothing_async,
            "stop_remote_worker_execution_loop_async": nothing_async,
        })
    return _sim["class"]


def install_sim_platform() -> None:
    """vLLM 0.10 detects its platform once per process, and modules keep what they got: the
    sim's platform (engine.adapters.v0.sim_platform) goes in as soon as `vllm.platforms` is
    imported, before anything resolves vLLM's own. Earlier releases take `device` instead."""
    from engine.adapters.versions import installed_version, release_for

    release = release_for(installed_version())
    if release is not None and release.engine == "v0" and release.version.startswith("0.10"):
        from engine.adapters.v0 import sim_platform

        sim_platform.install()


def install_sim(num_gpu_blocks: int = SIM_GPU_BLOCKS, seed: int = 0) -> None:
    """Every V0 engine built after this runs the sim executor (no model, no GPU), whatever
    picked its executor, with the sim's engine arguments (the family's device, no async output
    processing: engine.adapters.v0.build does the same), eager."""
    _sim.update(on=True, gpu_blocks=num_gpu_blocks, seed=seed)
    from vllm.engine.arg_utils import EngineArgs

    create = EngineArgs.create_engine_config
    if getattr(create, "_observatory", False):
        return

    @functools.wraps(create)
    def create_engine_config(self: Any, *args: Any, **kwargs: Any) -> Any:
        from engine.adapters.versions import family

        for name, value in {**family("sim").engine_kwargs(), "enforce_eager": True}.items():
            if hasattr(self, name):
                setattr(self, name, value)
        if getattr(self, "block_size", 16) is None:  # 0.10: CUDA's platform would pick 16
            self.block_size = 16
        return create(self, *args, **kwargs)

    create_engine_config._observatory = True  # type: ignore[attr-defined]
    EngineArgs.create_engine_config = create_engine_config


def engine_of(target: Any) -> Any | None:
    """The V0 `LLMEngine` behind an `LLM`, an `AsyncLLMEngine` or an `LLMEngine`; None for
    anything else."""
    from vllm.engine.llm_engine import LLMEngine

    for candidate in (target, getattr(target, "llm_engine", None),
                      getattr(target, "engine", None)):
        if isinstance(candidate, LLMEngine):
            return candidate
    return None


def is_scheduler(target: Any) -> bool:
    from vllm.core.scheduler import Scheduler

    return isinstance(target, Scheduler)


def _summary(engine: Any) -> dict[str, Any]:
    from engine.adapters.build_shared import summarize_config

    source = getattr(engine, "vllm_config", None) or engine
    return summarize_config(source)


class V0Tap:
    """One V0 engine with the observatory's hook on its scheduler and its steps heard."""

    kind = "v0"

    def __init__(self, engine: Any, policy: Policy, guard: Guard) -> None:
        import vllm

        self.engine = engine
        self.guard = guard
        self.scheduler = vllm_hooks.scheduler_of(engine)
        self.hook = vllm_hooks.attach(self.scheduler, policy)
        for name in vllm_hooks._WRAPPED:
            guard.wrap(self.scheduler, name, self.hook._originals)
        self.timer = exec_timing.ExecTimer(engine)  # never synchronises the user's GPU
        from engine.adapters.versions import family

        self.fans_out = bool(getattr(family(), "FANS_OUT", False))
        self.vllm_version = vllm.__version__
        model_config = engine.model_config
        self.model = str(getattr(model_config, "model", "?"))
        self.engine_config = _summary(engine)
        gpu_total, cpu_total = vllm_hooks.block_counts(self.scheduler)[1::2]
        self.facts = RequestFactsReader(self.scheduler.cache_config.block_size,
                                        gpu_total + cpu_total)
        self._wrapped: list[str] = []

    def hear(self, before_step: Callable[[], None], after_step: Callable[[], None],
             aborted: Callable[[BaseException], None],
             added: Callable[[str, int], None]) -> None:
        """Wrap the engine's `step`, `step_async` and `add_request` on the instance: our calls
        come before and after vLLM's own and never raise into it (their callers guard them)."""
        engine = self.engine
        self._saved = {name: vars(engine)[name] for name in ("step", "step_async", "add_request")
                       if name in vars(engine)}  # the program's own wrappers, if any
        step = engine.step

        def observed_step(*args: Any, **kwargs: Any) -> Any:
            before_step()
            try:
                out = step(*args, **kwargs)
            except Exception as exc:
                aborted(exc)
                raise
            after_step()
            return out

        engine.step = observed_step
        self._wrapped.append("step")
        step_async = getattr(engine, "step_async", None)
        if step_async is not None and inspect.iscoroutinefunction(step_async):
            async def observed_step_async(*args: Any, **kwargs: Any) -> Any:
                before_step()
                try:
                    out = await step_async(*args, **kwargs)
                except Exception as exc:
                    aborted(exc)
                    raise
                after_step()
                return out

            engine.step_async = observed_step_async
            self._wrapped.append("step_async")
            exit_cancel.mend()  # 0.5.0's AsyncLLMEngine would keep its program from exiting
        add = engine.add_request
        scheduler = self.scheduler

        facts, guard = self.facts, self.guard

        def observed_add(*args: Any, **kwargs: Any) -> Any:
            waiting = len(scheduler.waiting)
            out = add(*args, **kwargs)
            if len(scheduler.waiting) > waiting and not guard.broken:
                try:
                    groups = added_groups(scheduler, waiting)
                    group = groups[0]
                    taken = (vllm_hooks.request_id(group), len(group.prompt_token_ids),
                             facts.arrived(groups))
                except Exception as exc:  # noqa: BLE001  our code: never into vLLM's add
                    guard.fail(exc)
                    return out
                added(*taken)
            return out

        engine.add_request = observed_add
        self._wrapped.append("add_request")

    def record(self, step: int, cost: CostModel, sim_start_s: float, wall_s: float) -> Any:
        # The committed demand walks every sequence of every admitted group: 70% of a record's
        # cost on a busy engine (bench/bench_attach.py). A user's engine pays it only under
        # `reserve`, which needs it anyway; otherwise the record leaves it out (None).
        hook = self.hook
        demand = hook.demand() if hook.policy.name == "reserve" else None
        record = build_step_record(step, hook.current, self.scheduler, cost, sim_start_s,
                                   wall_s, self.fans_out, demand)
        record.exec_s = self.timer.take()
        return record

    def abort_state(self) -> dict[str, int]:
        return abort_state(self.scheduler)

    def detach(self) -> None:
        """Put vLLM's own methods back (the hook, the timer, the engine's wrappers)."""
        self.guard.broken = True
        self.hook.detach()
        self.timer.detach()
        for name in self._wrapped:
            vars(self.engine).pop(name, None)
        vars(self.engine).update(getattr(self, "_saved", {}))
        self._wrapped.clear()


def scheduler_hook(scheduler: Any, policy: Policy, guard: Guard) -> Any:
    """A bare V0 Scheduler: the policy hook only (records need its engine)."""
    hook = vllm_hooks.attach(scheduler, policy)
    for name in vllm_hooks._WRAPPED:
        guard.wrap(scheduler, name, hook._originals)
    return hook
