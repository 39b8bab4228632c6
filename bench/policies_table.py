"""The per-version policy table of docs/versions.md, every row from one command.

Runs bench/bench_policies.py --markdown in each V0 release's virtualenv, one after another (never
two at once: the wall-clock column is measured), with that release's presets (both seed presets
on 0.6.3.post1, verl's vLLM; seed-5578 elsewhere), and prints the table with its header.

Each release's interpreter is OBSERVATORY_PYTHON_<extra> (e.g. OBSERVATORY_PYTHON_vllm063=
~/.venvs/obs063/bin/python) or else CI's venv for that extra (.ci/venv_key.py); a release with
neither is left out, and the output says so.

    python3.11 bench/policies_table.py [--reps 3] [--pair-steps 300] [--only 0.6.3.post1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.adapters.versions import SUPPORTED  # noqa: E402

PRESETS = {"0.6.3.post1": "seed-5578,seed-5578-fitted"}
HEADER = ("| vLLM | policy | outcome (3,000 steps) | finished | gen tok/sim s vs `off` "
          "| committed peak | wall steps/s (`off`) or vs `off` |\n"
          "| --- | --- | --- | --- | --- | --- | --- |")


def interpreter(extra: str) -> Path | None:
    """The python of the venv for `extra`: the environment's choice, or CI's venv."""
    chosen = os.environ.get(f"OBSERVATORY_PYTHON_{extra}")
    if chosen:
        return Path(chosen)
    sys.path.insert(0, str(REPO / ".ci"))
    from venv_key import venv_key

    venv = Path.home() / ".cache" / "vllm-observatory" / f"venv-{venv_key(extra)}"
    return venv / "bin" / "python" if (venv / ".complete").exists() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--pair-steps", type=int, default=300)
    parser.add_argument("--only", default="", help="comma-separated releases (default: all V0)")
    args = parser.parse_args()
    only = {v.strip() for v in args.only.split(",") if v.strip()}
    print(HEADER, flush=True)
    for release in SUPPORTED:
        if release.engine != "v0" or (only and release.version not in only):
            continue
        python = interpreter(release.extra)
        if python is None:
            print(f"<!-- {release.version}: no venv ({release.install}) -->", flush=True)
            continue
        subprocess.run([str(python), str(REPO / "bench" / "bench_policies.py"), "--markdown",
                        "--presets", PRESETS.get(release.version, "seed-5578"),
                        "--reps", str(args.reps), "--pair-steps", str(args.pair_steps)],
                       cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), check=True)


if __name__ == "__main__":
    main()
