"""V1 engine figures (vLLM 0.33, the vllm033 venv), measured side by side in one run:

1. steps/s of the V1 sim engine with the observatory attached (its hooks, the policy `off`,
   each V1StepRecord built and encoded by a sink, as a recording would) against the same engine
   and workload driven bare: vLLM's V1 `LLMEngine.step()` loop with nothing of the
   observatory's attached. Arms alternate, both with the workload frozen out of the garbage
   collector; the median of each arm and the ratio of the medians of the pairs are printed.
2. What one V1StepRecord costs: bytes of its JSON line and microseconds to encode it, and the
   observatory's own work per step timed directly on a live engine's state (building the record,
   classifying the step's tokens), which machine load does not swing the way steps/s moves.

Run: PYTHONHASHSEED=0 python bench/bench_v1.py [--steps N] [--pairs P] [--preset NAME]
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


def bare(spec, steps: int) -> float:
    """steps/s of vLLM's own loop over `steps` steps (the first, which admits, untimed)."""
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
    start = time.perf_counter()
    for _ in range(steps):
        engine.step()
    elapsed = time.perf_counter() - start
    gc.unfreeze()
    return steps / elapsed


def observed(spec, steps: int, lines: list[bytes] | None = None) -> float:
    """steps/s of a Session over the same steps, every record encoded by its sink."""
    marks: dict[str, float] = {}

    def sink(item) -> None:
        if type(item) is V1StepRecord:
            line = encode(item)
            if lines is not None:
                lines.append(line)
            if item.step == 0:
                marks["start"] = time.perf_counter()
            elif item.step == steps:
                marks["end"] = time.perf_counter()

    from msgspec.structs import replace

    session = Session(replace(spec, max_steps=steps + 1).validated())
    session.subscribe(sink)
    session.run()
    return steps / (marks["end"] - marks["start"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--preset", default="v1-thrash")
    args = parser.parse_args()
    spec = preset_spec(args.preset).validated()
    bare_rates, observed_rates, ratios = [], [], []
    for pair in range(args.pairs):
        if pair % 2 == 0:
            b = bare(spec, args.steps)
            o = observed(spec, args.steps)
        else:
            o = observed(spec, args.steps)
            b = bare(spec, args.steps)
        bare_rates.append(b)
        observed_rates.append(o)
        ratios.append(o / b)
        print(f"pair {pair + 1}: bare {b:,.0f} steps/s, observed {o:,.0f} steps/s, "
              f"ratio {o / b:.3f}", flush=True)
    print(f"{args.preset}, {args.steps:,} steps x {args.pairs} alternating pairs: bare "
          f"{statistics.median(bare_rates):,.0f} steps/s, observed "
          f"{statistics.median(observed_rates):,.0f} steps/s (medians); observed/bare "
          f"median of pairs {statistics.median(ratios):.3f}")
    lines: list[bytes] = []
    observed(spec, args.steps, lines)
    from engine.stream.records import decode_record

    decoded = [decode_record(line) for line in lines]
    start = time.perf_counter()
    for _ in range(5):
        for record in decoded:
            encode(record)
    per = (time.perf_counter() - start) / (5 * len(decoded))
    print(f"one V1 step record: {statistics.mean(map(len, lines)):,.0f} bytes on average "
          f"(max {max(map(len, lines)):,}), {per * 1e6:.1f} us to encode")
    build_us, count_us = own_work(spec)
    print(f"the observatory's own work per step: {build_us:.1f} us building the record, "
          f"{count_us:.1f} us classifying the step's tokens (the hooks), against "
          f"{1e6 / statistics.median(bare_rates):,.0f} us for a bare step")
    return 0


def own_work(spec, repeats: int = 20_000) -> tuple[float, float]:
    """Microseconds to build one V1StepRecord and to classify one step's tokens, timed on the
    state of a live engine 300 steps in."""
    from msgspec.structs import replace

    session = Session(replace(spec, max_steps=300).validated())
    session.run()
    driver = session.driver
    capture, cost = driver.hook.current, spec.cost
    start = time.perf_counter()
    for _ in range(repeats):
        driver.reader.build(300, capture, cost, 0.0, 0.0, [])
    middle = time.perf_counter()
    for _ in range(repeats):
        driver.hook._count_tokens(capture, capture.output)
    end = time.perf_counter()
    return (middle - start) / repeats * 1e6, (end - middle) / repeats * 1e6


if __name__ == "__main__":
    sys.exit(main())
