"""V1 engine figures (vLLM 0.33, the vllm033 venv), measured side by side in one run:

1. steps/s of the V1 sim engine with the observatory attached (its hooks, the policy `off`,
   each V1StepRecord built and encoded by a sink, as a recording would) against the same engine
   and workload driven bare: vLLM's V1 `LLMEngine.step()` loop with nothing of the
   observatory's attached. Arms alternate, both with the workload frozen out of the garbage
   collector; the median of each arm and the ratio of the medians of the pairs are printed.
2. What one V1StepRecord costs: bytes of its JSON line and microseconds to encode it, and the
   observatory's own work per step timed directly on a live engine's state (building the record,
   classifying the step's tokens), which machine load does not swing the way steps/s moves.

With --tier, both on `v1-prefix-offload` (vLLM's CPU KV tier, its OffloadingConnector, with the
sim executor as its worker): the figures of 1. with the tier off (`--kv-offloading-size 0`) and
on, and 2. for the tier's records. The bare loop with the tier runs the same sim executor, whose
transfers then complete on a clock of the cost model's fixed 5 ms per step (the observed one
times them with the whole cost model: the decisions can differ by a step or so, the work per
step does not).

Run: PYTHONHASHSEED=0 python bench/bench_v1.py [--steps N] [--pairs P] [--preset NAME] [--tier]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.adapters.v1.platform import prepare_sim_process  # noqa: E402

prepare_sim_process()  # before anything imports vLLM (ConfigError without PYTHONHASHSEED=0)

from engine.adapters.v1.build import build_engine  # noqa: E402
from engine.session import Session  # noqa: E402
from engine.spec import preset_spec  # noqa: E402
from engine.stream.records import V1StepRecord, encode  # noqa: E402
from engine.workload import Workload  # noqa: E402


def bare(spec, steps: int) -> tuple[float, float]:
    """steps/s of vLLM's own loop over `steps` steps (the first, which admits, untimed), by the
    wall clock and by this thread's CPU time."""
    from vllm import SamplingParams

    built = build_engine(spec)
    engine = built.engine
    for request in Workload(spec, built.max_model_len).initial():
        params = SamplingParams(n=1, max_tokens=request.max_tokens, ignore_eos=True,
                                detokenize=False)
        engine.add_request(request.request_id, {"prompt_token_ids": request.prompt_token_ids},
                           params)
    engine.step()
    gc.collect()
    gc.freeze()
    start, cpu_start = time.perf_counter(), time.thread_time()
    for _ in range(steps):
        engine.step()
    elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu_start
    gc.unfreeze()
    return steps / elapsed, steps / cpu


def observed(spec, steps: int, lines: list[bytes] | None = None) -> tuple[float, float]:
    """steps/s of a Session over the same steps, every record encoded by its sink (wall, CPU)."""
    marks: dict[str, tuple[float, float]] = {}

    def sink(item) -> None:
        if type(item) is V1StepRecord:
            line = encode(item)
            if lines is not None:
                lines.append(line)
            if item.step == 0:
                marks["start"] = (time.perf_counter(), time.thread_time())
            elif item.step == steps:
                marks["end"] = (time.perf_counter(), time.thread_time())

    from msgspec.structs import replace

    session = Session(replace(spec, max_steps=steps + 1).validated())
    session.subscribe(sink)
    session.run()
    (wall0, cpu0), (wall1, cpu1) = marks["start"], marks["end"]
    return steps / (wall1 - wall0), steps / (cpu1 - cpu0)


def pairs(spec, steps: int, count: int, label: str) -> float:
    """Alternating bare/observed pairs; prints each and the medians, by the wall clock and by
    CPU time (which the other processes of a loaded machine swing less); returns the bare wall
    median."""
    bare_rates, observed_rates, ratios, cpu_ratios = [], [], [], []
    for pair in range(count):
        if pair % 2 == 0:
            b, b_cpu = bare(spec, steps)
            o, o_cpu = observed(spec, steps)
        else:
            o, o_cpu = observed(spec, steps)
            b, b_cpu = bare(spec, steps)
        bare_rates.append(b)
        observed_rates.append(o)
        ratios.append(o / b)
        cpu_ratios.append(o_cpu / b_cpu)
        print(f"{label} pair {pair + 1}: bare {b:,.0f} steps/s, observed {o:,.0f} steps/s, "
              f"ratio {o / b:.3f}; CPU {1e6 / b_cpu:.0f} us vs {1e6 / o_cpu:.0f} us a step, "
              f"ratio {o_cpu / b_cpu:.3f}", flush=True)
    print(f"{label}, {steps:,} steps x {count} alternating pairs: bare "
          f"{statistics.median(bare_rates):,.0f} steps/s, observed "
          f"{statistics.median(observed_rates):,.0f} steps/s (medians); observed/bare "
          f"median of pairs {statistics.median(ratios):.3f} (range {min(ratios):.3f}-"
          f"{max(ratios):.3f}); by CPU time {statistics.median(cpu_ratios):.3f} (range "
          f"{min(cpu_ratios):.3f}-{max(cpu_ratios):.3f})", flush=True)
    return statistics.median(bare_rates)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None,
                        help="steps per arm (default 2,000; 900 with --tier)")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--preset", default=None,
                        help="default v1-thrash; v1-prefix-offload with --tier")
    parser.add_argument("--tier", action="store_true",
                        help="the CPU KV tier off and on, on v1-prefix-offload")
    args = parser.parse_args()
    preset = args.preset or ("v1-prefix-offload" if args.tier else "v1-thrash")
    steps = args.steps or (900 if args.tier else 2000)
    spec = preset_spec(preset).validated()
    if args.tier:
        from msgspec.structs import replace

        pairs(replace(spec, kv_offloading_gib=0.0), steps, args.pairs, f"{preset}, no tier")
        bare_median = pairs(spec, steps, args.pairs, f"{preset}, CPU tier")
    else:
        bare_median = pairs(spec, steps, args.pairs, preset)
    lines: list[bytes] = []
    observed(spec, steps, lines)
    from engine.stream.records import decode_record

    decoded = [decode_record(line) for line in lines]
    start = time.perf_counter()
    for _ in range(5):
        for record in decoded:
            encode(record)
    per = (time.perf_counter() - start) / (5 * len(decoded))
    print(f"one V1 step record: {statistics.mean(map(len, lines)):,.0f} bytes on average "
          f"(max {max(map(len, lines)):,}), {per * 1e6:.1f} us to encode")
    build_us, count_us, tier_us = own_work(spec)
    tier = f", {tier_us:.1f} us reading the CPU tier" if tier_us is not None else ""
    print(f"the observatory's own work per step: {build_us:.1f} us building the record, "
          f"{count_us:.1f} us classifying the step's tokens (the hooks){tier}, against "
          f"{1e6 / bare_median:,.0f} us for a bare step")
    return 0


def own_work(spec, repeats: int = 20_000) -> tuple[float, float, float | None]:
    """Microseconds to build one V1StepRecord, to classify one step's tokens and (with a CPU
    tier) to read the tier's part of a record, timed on the state of a live engine 300 steps
    in."""
    from msgspec.structs import replace

    session = Session(replace(spec, max_steps=300).validated())
    session.run()
    driver = session.driver
    capture, cost = driver.hook.current, spec.cost
    tier = driver.tier.take(capture.output) if driver.tier is not None else None
    start = time.perf_counter()
    for _ in range(repeats):
        driver.reader.build(300, capture, cost, 0.0, 0.0, [], tier)
    middle = time.perf_counter()
    for _ in range(repeats):
        driver.hook._count_tokens(capture, capture.output)
    end = time.perf_counter()
    tier_us = None
    if driver.tier is not None:
        for _ in range(repeats):
            driver.tier.take(capture.output)
        tier_us = (time.perf_counter() - end) / repeats * 1e6
    return (middle - start) / repeats * 1e6, (end - middle) / repeats * 1e6, tier_us


if __name__ == "__main__":
    sys.exit(main())
