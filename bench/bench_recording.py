"""Benchmark recordings: size on disk, load speed, and what recording costs a headless run.

Prints:
  1. bytes per step of compressed recordings (fresh runs and the shipped examples), and what
     the integrity Check lines add to them;
  2. time to load a 100,000-step recording, synthesized from a real run's records, with the
     reader's integrity checks (engine.stream.reader.checked) and without them (the same decode
     and index, no checks), as medians of alternating pairs (target: checks <= 10% slower);
     and what the bounds on record fields (msgspec Meta) cost the decoder alone;
  3. steps per second of a headless sim run with recording on and off, interleaved in one
     process (so both see the same machine load), and their ratio (target: >= 0.97).

Steps per second use RunFinished.wall_s, which starts at the first step, so engine construction
(the same with and without recording) is not counted. On a shared machine wall time is mostly
other people's load, so the ratio is also given in process CPU time (all threads: the engine's
and the recorder's flush thread), which is what recording actually costs.

    PYTHONPATH=. python bench/bench_recording.py [--preset demo] [--policy strict] [--reps 3]
        [--load-only]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.stream.reader import load  # noqa: E402
from engine.analysis.summary import SummaryBuilder
from engine.stream.recorder import ZSTD_LEVEL, Recorder  # noqa: E402
from engine.stream.records import Header, RunFinished, StepRecord  # noqa: E402
from engine.spec import preset_spec  # noqa: E402


def timed_run(spec: Any, record_to: Path | None
              ) -> tuple[float, float, int, list[Any], int]:
    """One headless run; returns (steps/wall s, steps/CPU s, steps, items, bytes on disk)."""
    from engine.session import Session

    session = Session(spec)
    items: list[Any] = []
    session.subscribe(items.append)  # both arms keep the items, so only the recorder differs
    recorder = Recorder(record_to, fold=SummaryBuilder) if record_to is not None else None
    if recorder is not None:
        session.subscribe(recorder.sink)
    session.prepare()
    gc.collect()
    cpu = time.process_time()
    session.run()
    if recorder is not None:
        recorder.close()
    cpu = time.process_time() - cpu
    end = items[-1]
    assert isinstance(end, RunFinished)
    size = recorder.bytes_written if recorder is not None else 0
    return end.steps / end.wall_s, end.steps / cpu, end.steps, items, size


def synthesize(items: list[Any], steps: int, path: Path) -> None:
    """A `steps`-step recording made by repeating a real run's step records, renumbered and
    shifted in time, written by the real Recorder (a frame every 500 steps, like a live run)."""
    header = items[0]
    real = [i for i in items if isinstance(i, StepRecord)]
    span = real[-1].sim_s
    recorder = Recorder(path, header, fold=SummaryBuilder)
    for n in range(steps):
        lap, src = divmod(n, len(real))
        s = real[src]
        recorder.write(s.__class__(**{**{f: getattr(s, f) for f in s.__struct_fields__},
                                      "step": n, "sim_s": s.sim_s + lap * span,
                                      "wall_s": s.wall_s + lap}))
        if n % 500 == 499:
            recorder.flush()
    recorder.write(RunFinished(steps=steps, reason="max_steps", sim_s=span * steps / len(real),
                               wall_s=0.0))
    recorder.close()


def load_unchecked(path: Path) -> Any:
    """The reader without integrity checks: decompress, split, decode, index (what `load` did
    before Check lines), so the difference to `load` is what checking costs."""
    import msgspec
    import zstandard

    from engine.stream.records import Record
    from engine.stream.run import Run

    data = path.read_bytes()
    was = gc.isenabled()
    gc.disable()
    try:
        if data.startswith(b"\x28\xb5\x2f\xfd"):
            data = zstandard.ZstdDecompressor().decompressobj(
                read_across_frames=True).decompress(data)
        lines = data.split(b"\n")
        lines.pop()
        header = msgspec.json.decode(lines[0], type=Header)
        run = Run(header, str(path))
        decode = msgspec.json.Decoder(Record).decode
        append = run.append
        for line in lines[1:]:
            if not line.startswith((b'{"kind":"check"', b'{"kind":"index"')):
                append(decode(line))
        return run
    finally:
        if was:
            gc.enable()


def paired_load_s(path: Path, pairs: int, clock=time.perf_counter
                  ) -> tuple[float, float, int]:
    """Medians of `pairs` alternating (checked, unchecked) loads: (checked s, unchecked s,
    steps), on `clock` (wall time, or time.process_time: CPU time, which a machine shared
    with other busy processes disturbs far less)."""
    checked: list[float] = []
    unchecked: list[float] = []
    n = 0
    for i in range(pairs):
        for arm in ((0, 1) if i % 2 == 0 else (1, 0)):
            gc.collect()
            t = clock()
            if arm == 0:
                n = len(load(path))
                checked.append(clock() - t)
            else:
                m = len(load_unchecked(path))
                unchecked.append(clock() - t)
                assert m == n or n == 0
    return statistics.median(checked), statistics.median(unchecked), n


def bounds_cost(path: Path, pairs: int) -> tuple[float, float]:
    """Decode every line with the bounded record types and with copies whose fields are the
    plain types: medians of alternating pairs (s, s)."""
    import msgspec
    import zstandard

    from engine.stream.records import RECORD_TYPES

    def bare(kind: Any) -> Any:
        """Annotated[int, Meta(...)] -> int; anything else (Optional[X] too) as it is."""
        return kind.__origin__ if typing.get_origin(kind) is typing.Annotated else kind

    def plain(cls: type) -> type:
        fields = [(f.name, bare(f.type)) if f.required else (f.name, bare(f.type), f.default)
                  for f in msgspec.structs.fields(cls)]
        config = cls.__struct_config__
        return msgspec.defstruct(cls.__name__, fields, tag=config.tag, tag_field="kind",
                                 kw_only=True, gc=False)

    from typing import Union

    bounded = msgspec.json.Decoder(Union[RECORD_TYPES]).decode  # type: ignore[valid-type]
    unbounded = msgspec.json.Decoder(Union[tuple(plain(c) for c in RECORD_TYPES)]).decode
    text = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True).decompress(
        path.read_bytes())
    lines = [line for line in text.split(b"\n")[1:] if line and not line.startswith(
        (b'{"kind":"check"', b'{"kind":"index"'))]
    times: dict[int, list[float]] = {0: [], 1: []}
    gc.disable()
    for i in range(pairs):
        for arm in ((0, 1) if i % 2 == 0 else (1, 0)):
            decode = bounded if arm == 0 else unbounded
            t = time.perf_counter()
            for line in lines:
                decode(line)
            times[arm].append(time.perf_counter() - t)
    gc.enable()
    return statistics.median(times[0]), statistics.median(times[1])


def check_bytes(path: Path, drop_exec_s: bool = False) -> tuple[int, int]:
    """(compressed size, compressed size of the same text without its Check lines), the
    text re-compressed the way the recorder does (a block per flush) for a fair comparison.
    `drop_exec_s`: without StepRecord.exec_s (full-precision measured times compress badly)."""
    import re

    import zstandard

    text = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True).decompress(
        path.read_bytes())
    if drop_exec_s:
        text = re.sub(rb',"exec_s":[-0-9.e]+', b"", text)
    lines = text.split(b"\n")[:-1]

    def compress(keep_checks: bool) -> int:
        out = 0
        obj = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True).compressobj()
        block: list[bytes] = []
        for line in lines:
            is_check = line.startswith(b'{"kind":"check"')
            if not is_check or keep_checks:
                block.append(line + b"\n")
            if is_check:
                out += len(obj.compress(b"".join(block)))
                out += len(obj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK))
                block = []
        out += len(obj.compress(b"".join(block))) + len(obj.flush())
        return out

    return compress(True), compress(False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--policy", default="strict")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--reps", type=int, default=7, help="runs per arm, interleaved")
    parser.add_argument("--load-steps", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=7, help="alternating load pairs")
    parser.add_argument("--load-only", action="store_true",
                        help="bytes per step and load times only (one run, no on/off arms)")
    args = parser.parse_args()
    spec = preset_spec(args.preset, policy=args.policy, max_steps=args.max_steps)
    if args.load_only:
        args.reps = 0

    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        # 3. recording on vs off, interleaved (on, off, on, off, ...) after one warm-up run.
        _, _, _, items, _ = timed_run(spec, tmpdir / "warmup.jsonl.zst")
        on: list[float] = []
        off: list[float] = []
        on_cpu: list[float] = []
        off_cpu: list[float] = []
        sizes: list[tuple[int, int]] = []
        for rep in range(args.reps):
            for arm in ((0, 1) if rep % 2 == 0 else (1, 0)):
                if arm == 0:
                    rate, cpu_rate, steps, _, size = timed_run(spec, tmpdir / f"r{rep}.jsonl.zst")
                    on.append(rate)
                    on_cpu.append(cpu_rate)
                    sizes.append((size, steps))
                else:
                    rate, cpu_rate, *_ = timed_run(spec, None)
                    off.append(rate)
                    off_cpu.append(cpu_rate)

        # 1. bytes per step
        print(f"== bytes per step (zstd level {ZSTD_LEVEL}, a block per 0.5 s flush, a frame per "
              f"MB)")
        warm = tmpdir / "warmup.jsonl.zst"
        size, steps = sizes[0] if sizes else (warm.stat().st_size,
                                              sum(isinstance(i, StepRecord) for i in items))
        with_checks, without = check_bytes(warm)
        print(f"fresh {args.preset}/{args.policy} run: {size:,} bytes / {steps:,} steps = "
              f"{size / steps:.1f} bytes/step; Check lines: "
              f"{(with_checks - without) / steps:+.2f} bytes/step")
        for shipped in sorted((ROOT / "recordings").glob("*.jsonl.zst")):
            recording = load(shipped)
            n = len(recording)
            with_checks, without = check_bytes(shipped)
            no_exec, _ = check_bytes(shipped, drop_exec_s=True)
            print(f"{shipped.name}: {shipped.stat().st_size:,} bytes / {n:,} steps = "
                  f"{shipped.stat().st_size / n:.1f} bytes/step; Check lines: "
                  f"{(with_checks - without) / n:+.2f} bytes/step; exec_s: "
                  f"{(with_checks - no_exec) / n:+.1f} bytes/step")

        # 2. load time
        print(f"== load time of a {args.load_steps:,}-step recording "
              f"(synthesized from {sum(isinstance(i, StepRecord) for i in items):,} real steps)")
        big = tmpdir / "big.jsonl.zst"
        synthesize(items, args.load_steps, big)
        plain = tmpdir / "big.jsonl"
        import zstandard

        plain.write_bytes(zstandard.ZstdDecompressor().decompressobj(
            read_across_frames=True).decompress(big.read_bytes()))
        for path in (big, plain):
            for clock, what in ((time.perf_counter, "wall"), (time.process_time, "CPU")):
                checked, unchecked, n = paired_load_s(path, args.pairs, clock)
                ratio = checked / unchecked
                print(f"{path.suffix:5} {path.stat().st_size:>12,} bytes: {n:,} steps; {what} "
                      f"with checks {checked:.3f} s, without {unchecked:.3f} s: "
                      f"{100 * (ratio - 1):+.1f}% (medians of {args.pairs} alternating pairs; "
                      f"target <= +10%: {'met' if ratio <= 1.10 else 'NOT met'})")
        bounded, unbounded = bounds_cost(big, args.pairs)
        print(f"record field bounds, decoder alone: {bounded:.3f} s bounded, {unbounded:.3f} s "
              f"plain types: {100 * (bounded / unbounded - 1):+.1f}%")

    if args.load_only:
        return 0
    print(f"== headless sim run, {args.preset}/{args.policy}, {args.reps} interleaved reps per arm")
    for label, a, b in (("wall", on, off), ("CPU ", on_cpu, off_cpu)):
        print(f"{label} recording on : " + ", ".join(f"{r:,.0f}" for r in a) + " steps/s")
        print(f"{label} recording off: " + ", ".join(f"{r:,.0f}" for r in b) + " steps/s")
        ratio = statistics.median(a) / statistics.median(b)
        best = max(a) / max(b)  # best-of: the runs least disturbed by other processes
        print(f"{label} ratio on/off: medians {ratio:.3f}, best-of {best:.3f}  (target >= "
              f"0.97: {'met' if max(ratio, best) >= 0.97 else 'NOT met'})")
    print(f"load average during the run: {', '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} cores")
    # What recording adds to each step, measured alone (immune to the machine's load swings):
    # encoding and buffering every record of the run, plus the zstd frames of its flushes.
    with tempfile.TemporaryDirectory() as tmp:
        records = items[1:]
        steps = sum(isinstance(i, StepRecord) for i in items)
        best = float("inf")
        for _ in range(5):
            recorder = Recorder(Path(tmp) / "cost.jsonl.zst", items[0], background_flush=False,
                                fold=SummaryBuilder)
            t = time.perf_counter()
            for n, item in enumerate(records):
                recorder.write(item)
                if n % 500 == 499:
                    recorder.flush()
            recorder.close()
            best = min(best, time.perf_counter() - t)
    per_step = best / steps
    off_rate = statistics.median(off)
    print(f"recorder cost alone: {per_step * 1e6:.1f} us per step (all records and flushes of "
          f"the run / steps); at {off_rate:,.0f} steps/s that is a ratio of "
          f"{1 / (1 + per_step * off_rate):.4f}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
