"""vLLM #25538 on every V1 line, in one table: the thrash under `off` and the fix.

For each V1 release of engine/adapters/versions.SUPPORTED, in that release's interpreter (one
after another), runs `observatory run --json --no-record` on `v1-thrash` and
`v1-concurrent-prefill` under `off` and `whole-context`, to the end, and prints one row each:
preemptions, the most of one request, the recompute tax (tokens computed again over tokens
computed), requests finished, and simulated seconds.

Each release's interpreter is OBSERVATORY_PYTHON_<extra> (e.g. OBSERVATORY_PYTHON_vllm0290=
~/.venvs/obs029/bin/python) or else CI's venv for that extra (.ci/venv_key.py); a release with
neither is left out, and the output says so.

    python3.11 bench/v1_thrash_table.py [--only 0.29.0] [--presets v1-thrash]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.adapters.versions import SUPPORTED  # noqa: E402

HEADER = ("| vLLM | preset | policy | preemptions | most of one request | recompute tax "
          "| finished | sim s |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
POLICIES = ("off", "whole-context")


def interpreter(extra: str) -> Path | None:
    given = os.environ.get(f"OBSERVATORY_PYTHON_{extra}")
    if given:
        return Path(given)
    key = subprocess.run([sys.executable, str(REPO / ".ci" / "venv_key.py"), extra],
                         capture_output=True, text=True, check=True).stdout.strip()
    root = Path(os.environ.get("OBSERVATORY_VENV_ROOT",
                               Path.home() / ".cache" / "vllm-observatory"))
    python = root / f"venv-{key}" / "bin" / "python"
    return python if (python.parent.parent / ".complete").exists() else None


def run(python: Path, preset: str, policy: str) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run([str(python), "-m", "engine.cli", "run", "--preset", preset,
                           "--policy", policy, "--json", "--no-record"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"{preset} {policy}: exit {done.returncode}: {tail}")
    return json.loads(done.stdout[done.stdout.index("{"):done.stdout.rindex("}") + 1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="VERSION",
                        help="just this release (repeatable)")
    parser.add_argument("--presets", default="v1-thrash,v1-concurrent-prefill")
    args = parser.parse_args()
    rows, missing = [], []
    for release in SUPPORTED:
        if release.engine != "v1" or (args.only and release.version not in args.only):
            continue
        python = interpreter(release.extra)
        if python is None:
            missing.append(f"{release.version} (no venv: bash .ci/venv {release.extra})")
            continue
        for preset in args.presets.split(","):
            for policy in POLICIES:
                try:
                    s = run(python, preset, policy)
                except RuntimeError as exc:
                    rows.append(f"| {release.version} | {preset} | {policy} | {exc} |||||")
                    print(rows[-1], flush=True)
                    continue
                rows.append(f"| {release.version} | {preset} | {policy} | {s['preemptions']:,} | "
                            f"{s['max_preemptions_per_request']} | {s['recompute_tax']:.3f} | "
                            f"{s['finished_requests']} | {s['sim_seconds']:.1f} |")
                print(rows[-1], file=sys.stderr, flush=True)
    print(HEADER)
    print("\n".join(rows))
    if missing:
        print(f"\nleft out: {'; '.join(missing)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
