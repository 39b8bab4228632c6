"""What the hunt's detectors cost a step, now against a git revision's (issue #40).

Every hunt workload feeds each record of its stream to engine.hunt.detectors.Detectors. This
feeds the records of the given recordings (not their checks, tally and index) to today's detectors
and to REV's (the module's source at that revision, loaded beside it), alternating in pairs
because this machine is noisy, and prints microseconds a step for each and the median of the
pairs' ratios. No vLLM needed:

    python bench/hunt_detectors.py --rev ff8812a RECORDING.jsonl.zst ...
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _module_at(rev: str):
    source = subprocess.run(["git", "show", f"{rev}:engine/hunt/detectors.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "detectors_at_rev.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("detectors_at_rev", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _items(path: Path) -> list:
    """The recording's header and records, in stream order, as a Session sink sees them."""
    import io

    import msgspec
    import zstandard

    from engine.stream.records import Header, decode_record

    with path.open("rb") as raw:
        lines = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(raw)).read()
    header, *rest = lines.splitlines()
    trailer = ('{"kind":"check"', '{"kind":"tally"', '{"kind":"index"')  # the file's, not the run's
    records = [decode_record(line) for line in rest if not line.startswith(trailer)]
    return [msgspec.json.decode(header, type=Header), *records]


def _feed(detectors_class, items: list) -> float:
    start = time.perf_counter()
    d = detectors_class()
    for item in items:
        d.add(item)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recordings", nargs="+", type=Path)
    parser.add_argument("--rev", default="ff8812a", help="the revision to compare against")
    parser.add_argument("--pairs", type=int, default=9)
    args = parser.parse_args()
    from engine.hunt.detectors import Detectors
    from engine.stream.records import STEP_TYPES

    old = _module_at(args.rev).Detectors
    for path in args.recordings:
        items = _items(path)
        steps = sum(1 for item in items if type(item) in STEP_TYPES)
        now_s, then_s, ratios = [], [], []
        for _ in range(args.pairs):
            a, b = _feed(Detectors, items), _feed(old, items)
            now_s.append(a)
            then_s.append(b)
            ratios.append(a / b)
        print(f"{path.parent.name or path.name}: {steps:,} steps; detectors now "
              f"{statistics.median(now_s) / steps * 1e6:.2f} us/step, at {args.rev} "
              f"{statistics.median(then_s) / steps * 1e6:.2f} us/step; now/then median of "
              f"{args.pairs} pairs {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
