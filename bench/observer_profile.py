"""Where the V1 observer's time goes (issue #30): a ladder of arms on vLLM 0.33's V1 sim engine,
each adding one layer of the observatory to vLLM's bare `LLMEngine.step()` loop, timed by the
engine thread's CPU time per step (2,000 `v1-thrash` steps an arm, a fresh engine each, the
workload frozen out of the garbage collector as bench/bench_v1.py does).

The ladder's ends are bench/bench_v1.py's own arms (vLLM's bare loop; a Session, every record
encoded by a sink). The layers between, in the order the ladder adds them:
1. the hooks' skeleton: `schedule` and `_preempt_request` wrapped, a capture per step, no more;
2. the hooks' work: classifying the step's tokens, the head request's reason, watching vLLM's
   `allocate_slots` while requests wait (what `off` does);
3. the executor timer (each step's measured `exec_s`);
4. the driver's step (which requests finished, whether `schedule` ran);
5. building each step's record;
6. the Session's loop, every record encoded by a sink (bench/bench_v1.py's observed arm).

Arms alternate, their order reversed every round; the median of each arm over the rounds is
printed with what its layer adds over the arm before. The layers' own costs, timed warm in a
loop, are smaller (bench/bench_v1.py's last line): inside vLLM's step, the same code runs
with cold caches.

Run: PYTHONHASHSEED=0 python bench/observer_profile.py [--rounds R] [--steps N]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.adapters.v1.platform import prepare_sim_process  # noqa: E402

prepare_sim_process()  # before anything imports vLLM (ConfigError without PYTHONHASHSEED=0)

from engine.adapters import exec_timing  # noqa: E402
from engine.adapters.v1 import hooks as v1_hooks  # noqa: E402
from engine.adapters.v1.build import build_engine  # noqa: E402
from engine.adapters.v1.driver import V1Driver  # noqa: E402
from engine.policy import parse_policy  # noqa: E402
from engine.spec import preset_spec  # noqa: E402
from engine.workload import Workload  # noqa: E402

import bench_v1  # noqa: E402  (this directory's: the bare and observed arms, as it times them)

SPEC = preset_spec("v1-thrash").validated()


def _add_workload(engine, max_model_len: int) -> None:
    from vllm import SamplingParams

    for request in Workload(SPEC, max_model_len).initial():
        engine.add_request(request.request_id, {"prompt_token_ids": request.prompt_token_ids},
                           SamplingParams(n=1, max_tokens=request.max_tokens, ignore_eos=True,
                                          detokenize=False))


def _timed(first: Callable[[], object], step: Callable[[], object], steps: int) -> float:
    """CPU microseconds a step of `step`, after `first` (the step that admits, untimed)."""
    first()
    gc.collect()
    gc.freeze()
    start = time.thread_time()
    for _ in range(steps):
        step()
    cpu = time.thread_time() - start
    gc.unfreeze()
    return cpu / steps * 1e6


def engine_arm(layers: int, steps: int) -> float:
    """vLLM's own loop with the first `layers` layers (1 to 3) attached."""
    built = build_engine(SPEC)
    hook = v1_hooks.attach(built.scheduler, "off")
    if layers == 1:  # the skeleton: the hooks' own work left out
        hook._count_tokens = lambda capture, output: None
        hook._head_reason = lambda capture, output: None
        hook._observe_admissions = lambda force=False: None
        vars(built.scheduler.kv_cache_manager).pop("allocate_slots", None)
    if layers >= 3:
        exec_timing.ExecTimer(built.engine_core)
    _add_workload(built.engine, built.max_model_len)
    return _timed(built.engine.step, built.engine.step, steps)


def driver_arm(records: bool, steps: int) -> float:
    """The V1 driver's step (layer 4), and with `records` each step's record (layer 5)."""
    driver = V1Driver(SPEC, parse_policy("off"))
    _add_workload(driver.engine, driver.max_model_len)
    cost = SPEC.cost
    state = {"step": 0, "sim_s": 0.0}

    def step() -> None:
        driver.step()
        if records:
            state["step"] += 1
            state["sim_s"] = driver.record(state["step"], cost, state["sim_s"], 0.0).sim_s

    return _timed(step, step, steps)


ARMS: tuple[tuple[str, Callable[[int], float]], ...] = (
    # the ladder's two ends are bench/bench_v1.py's own arms (steps a CPU second -> us a step)
    ("vLLM's bare loop", lambda steps: 1e6 / bench_v1.bare(SPEC, steps)[1]),
    ("+ the hooks' skeleton", lambda steps: engine_arm(1, steps)),
    ("+ the hooks' work (tokens, reason, admissions)", lambda steps: engine_arm(2, steps)),
    ("+ the executor timer", lambda steps: engine_arm(3, steps)),
    ("+ the driver's step", lambda steps: driver_arm(False, steps)),
    ("+ building the record", lambda steps: driver_arm(True, steps)),
    ("+ the session loop, records encoded",
     lambda steps: 1e6 / bench_v1.observed(SPEC, steps)[1]),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name, _ in ARMS}
    for round_ in range(args.rounds):
        order = ARMS if round_ % 2 == 0 else ARMS[::-1]
        for name, arm in order:
            times[name].append(arm(args.steps))
        print(f"round {round_ + 1}: " + ", ".join(f"{times[name][-1]:.0f}" for name, _ in ARMS)
              + " us a step", flush=True)
    medians = [statistics.median(times[name]) for name, _ in ARMS]
    bare = medians[0]
    print(f"v1-thrash, {args.steps:,} steps an arm x {args.rounds} rounds, engine thread CPU "
          f"per step (medians):")
    for (name, _), median, before in zip(ARMS, medians, [None, *medians[:-1]]):
        added = "" if before is None else f", adds {median - before:+.1f} us"
        spread = f"{min(times[name]):.0f}-{max(times[name]):.0f}"
        print(f"  {name}: {median:.1f} us ({spread}){added}; bare/this {bare / median:.3f}")
    print(f"  the observer in all: {medians[-1] - bare:.1f} us a step over {bare:.1f}; the "
          f"0.95 target leaves {bare / 0.95 - bare:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
