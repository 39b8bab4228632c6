"""vLLM's own scheduler tests under each policy on the installed release: which change outcome.

Runs the release's tests/core/test_scheduler.py and test_chunked_prefill_scheduler.py (from its
sdist, engine.adapters.v0.upstream_tests) once on bare vLLM and once per policy with the
observatory attached to every Scheduler, and prints every test whose outcome differs from bare
vLLM's, with the failing assertion. The table in docs/versions.md is this output.

Run in each release's venv (from the repo root):
    PYTHONPATH=$PWD python bench/upstream_scheduler_tests.py [--policies off,strict,watermark,reserve]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.adapters.v0 import upstream_tests  # noqa: E402
from engine.adapters.versions import require_supported  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default=",".join(upstream_tests.POLICIES))
    args = parser.parse_args()
    release = require_supported()
    t0 = time.perf_counter()
    bare = upstream_tests.run(upstream_tests.BARE)
    counts = {o: sum(1 for v in bare.values() if v.outcome == o) for o in ("passed", "failed",
                                                                           "skipped", "error")}
    print(f"vLLM {release.version}: {len(bare)} tests in {', '.join(upstream_tests.TEST_FILES)}; "
          f"bare vLLM: {', '.join(f'{n} {o}' for o, n in counts.items() if n)}")
    for name, outcome in bare.items():
        if outcome.outcome in ("failed", "error"):
            print(f"  bare {outcome.outcome}: {name}: {outcome.line[:160]}")
    for policy in filter(None, (p.strip() for p in args.policies.split(","))):
        outcomes = upstream_tests.run(policy)
        diff = upstream_tests.changed(bare, outcomes)
        print(f"  {policy}: {len(diff)} changed" + (":" if diff else ""))
        for name, (was, now) in diff.items():
            print(f"    {name}: {was} -> {now}: {outcomes[name].line[:160] if name in outcomes else ''}")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
