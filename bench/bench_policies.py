"""What each policy guarantees and costs on the installed vLLM: the table in docs/versions.md.

For each preset and each policy (off, strict, watermark, reserve, and `off` with chunked prefill
turned off), one sim run of at most --max-steps steps, and prints:

- the step vLLM aborts at, or "survived N" (N = --max-steps: the range the claims of
  docs/versions.md name);
- finished requests;
- generated tokens per simulated second over `off`'s lifetime (the simulated seconds `off` lived
  before it aborted), and that against `off`'s own rate. The sim is deterministic: these figures
  are exact, not samples;
- the committed demand's peak (engine.policy.Demand) against GPU + CPU blocks;
- steps/s of wall time (first step's end to the last's, the engine's build left out): each
  policy's run against `off`'s over --pair-steps steps (default: `off`'s lifetime), in --reps
  alternating pairs, as median and range of the ratio; `off`'s own row gives its steps/s. A
  ratio whose range is wider than its distance from 1.0 is printed as "no difference". These
  are the only measured figures: they move with the machine's load (printed with --markdown).

Run in each release's venv (from the repo root, PYTHONPATH=$PWD):
    python bench/bench_policies.py [--presets seed-5578,seed-5578-fitted] [--max-steps 3000]
`bench/policies_table.py` runs it in every release's venv and prints docs/versions.md's table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.adapters.versions import require_supported  # noqa: E402
from engine.session import Session  # noqa: E402
from engine.spec import preset_spec  # noqa: E402
from engine.stream.records import EngineAborted, RunFinished, StepRecord  # noqa: E402

POLICIES = ("off", "strict", "watermark", "reserve")
NO_CHUNKED = "off-no-chunked-prefill"  # `off` with enable_chunked_prefill=False


@dataclass
class Outcome:
    label: str
    steps: list[StepRecord]
    abort: EngineAborted | None
    end: RunFinished | None
    wall_s: float

    @property
    def verdict(self) -> str:
        if self.abort is not None:
            return f"aborts at step {self.abort.step:,}"
        reason = self.end.reason if self.end is not None else "?"
        return (f"survived {len(self.steps):,} steps" if reason == "max_steps"
                else f"{reason} after {len(self.steps):,} steps")

    @property
    def finished(self) -> int:
        return sum(len(s.finished) for s in self.steps)

    def tokens_until(self, sim_s: float) -> tuple[int, float]:
        """(generated tokens, simulated seconds) over the steps that ended by `sim_s`."""
        tokens, until = 0, 0.0
        for s in self.steps:
            if s.sim_s > sim_s:
                break
            tokens, until = tokens + s.generated_tokens, s.sim_s
        return tokens, until

    def committed_peak(self) -> tuple[int, int] | None:
        known = [s for s in self.steps if s.committed_blocks is not None]
        if not known:
            return None
        top = max(known, key=lambda s: s.committed_blocks)
        return top.committed_blocks, top.capacity_blocks


def run(preset: str, label: str, max_steps: int) -> Outcome:
    overrides = {"max_steps": max_steps}
    if label == NO_CHUNKED:
        overrides.update(policy="off", enable_chunked_prefill=False)
    else:
        overrides["policy"] = label
    spec = preset_spec(preset, **overrides).validated()
    items: list = []
    session = Session(spec)
    session.subscribe(items.append)
    t0 = time.perf_counter()
    session.run()
    wall = time.perf_counter() - t0
    return Outcome(label, [i for i in items if isinstance(i, StepRecord)],
                   next((i for i in items if isinstance(i, EngineAborted)), None),
                   next((i for i in items if isinstance(i, RunFinished)), None), wall)


def steps_per_s(preset: str, label: str, steps: int) -> float:
    """Steps per second of wall time between the first step's end and the last's (the engine's
    build and teardown excluded: they would swamp a short run)."""
    steps_run = run(preset, label, steps).steps
    if len(steps_run) < 2:
        return 0.0
    return (len(steps_run) - 1) / max(1e-9, steps_run[-1].wall_s - steps_run[0].wall_s)


def spread(values: list[float], unit: str = "") -> str:
    """Median [range] of `values`. A ratio whose range is wider than its distance from 1.0 is
    not printed as a difference."""
    if not values:
        return "–"
    low, high = min(values), max(values)
    if unit == "x" and high - low >= abs(statistics.median(values) - 1.0):
        return f"no difference [{low:.2f}–{high:.2f}]"
    return f"{statistics.median(values):.2f}{unit} [{low:.2f}–{high:.2f}]"


def row_label(preset: str, label: str) -> str:
    text = "`off`, chunked prefill off" if label == NO_CHUNKED else f"`{label}`"
    return text if preset == "seed-5578" else f"{text} ({preset})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="seed-5578",
                        help="comma-separated presets (default: seed-5578)")
    parser.add_argument("--policies", default=",".join(POLICIES + (NO_CHUNKED,)),
                        help="comma-separated policies (default: all, and chunked prefill off)")
    parser.add_argument("--max-steps", type=int, default=3000)
    parser.add_argument("--reps", type=int, default=3, help="alternating pairs per wall rate")
    parser.add_argument("--pair-steps", type=int, default=None,
                        help="steps per timed run (default: off's lifetime)")
    parser.add_argument("--markdown", action="store_true",
                        help="print the table rows of docs/versions.md instead")
    args = parser.parse_args()
    release = require_supported()
    import vllm

    labels = [p.strip() for p in args.policies.split(",") if p.strip()]
    if "off" not in labels:
        labels.insert(0, "off")
    say = (lambda *a, **k: None) if args.markdown else print
    say(f"vLLM {vllm.__version__} (family {release.family}), at most {args.max_steps:,} steps")
    rows: list[str] = []
    loads: list[float] = []
    for preset in filter(None, (p.strip() for p in args.presets.split(","))):
        off = run(preset, "off", args.max_steps)
        horizon = off.steps[-1].sim_s if off.steps else 0.0
        off_tokens, off_until = off.tokens_until(horizon)
        off_rate = off_tokens / off_until if off_until else 0.0
        pair_steps = args.pair_steps or max(10, len(off.steps))
        say(f"\n{preset}: off's lifetime {len(off.steps):,} steps = {horizon:.1f} simulated s, "
            f"{off_rate:,.0f} generated tok/s; wall ratios over {pair_steps:,} steps, "
            f"{args.reps} alternating pairs, median [range]")
        say(f"  {'policy':<24} {'outcome':<24} {'finished':>8} {'tok/sim s':>10} "
            f"{'vs off':>7} {'committed peak':>22}  wall steps/s vs off")
        outcomes = {label: off if label == "off" else run(preset, label, args.max_steps)
                    for label in labels}
        ratios: dict[str, list[float]] = {label: [] for label in labels}
        off_rates: list[float] = []
        for rep in range(args.reps):  # alternating pairs: off then X, X then off, ...
            for label in labels:
                if label == "off":
                    continue
                pair = ["off", label] if rep % 2 == 0 else [label, "off"]
                loads.append(os.getloadavg()[0])
                measured = {name: steps_per_s(preset, name, pair_steps) for name in pair}
                ratios[label].append(measured[label] / measured["off"])
                off_rates.append(measured["off"])
        for label in labels:
            outcome = outcomes[label]
            tokens, until = outcome.tokens_until(horizon)
            rate = tokens / until if until else 0.0
            peak = outcome.committed_peak()
            peak_text = f"{peak[0]:,} / {peak[1]:,}" if peak else "–"
            wall = (spread(off_rates, " steps/s") if label == "off"
                    else spread(ratios[label], "x"))
            share = rate / off_rate if off_rate else 0.0
            say(f"  {label:<24} {outcome.verdict:<24} {outcome.finished:>8,} {rate:>10,.0f} "
                f"{share:>6.0%} {peak_text:>22}  {wall}", flush=True)
            rows.append(f"| {release.version} | {row_label(preset, label)} | {outcome.verdict} "
                        f"| {outcome.finished:,} | {rate:,.0f} ({share:.0%}) | {peak_text} "
                        f"| {wall} |")
    if args.markdown:
        print("\n".join(rows))
        if loads:
            print(f"<!-- {release.version}: wall pairs of {args.pair_steps or 'lifetime'} steps, "
                  f"{args.reps} reps, load average {min(loads):.0f}-{max(loads):.0f} -->")


if __name__ == "__main__":
    main()
