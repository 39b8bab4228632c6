"""How often `observatory exec --sim --record` leaves a whole, indexed recording (issue #31:
"ten runs out of ten"), and how long `verify` takes to refuse the recording.

Each run executes a user program that never names the observatory, under `exec --sim --record
DIR`, in the installed release's venv: on a V1 release `tests/fixtures/attach/v1_rollout.py`
(a plain `LLM(...)` script whose EngineCore runs in its own process and is killed by vLLM at
exit), on a V0 release `tests/fixtures/attach/verl_rollout.py` (verl's rollout shape), or with
`--script` another program under tests/fixtures/attach/. A run counts as sealed when the
recording has its index and `observatory summary` reads it with exit 0 and no cut notice.

    PYTHONHASHSEED=0 python bench/exec_sealed.py --runs 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MODEL = str(ROOT / "engine" / "adapters" / "models" / "llama-16k")


def one_run(script: Path, out: Path) -> tuple[bool, str, float, float]:
    """(sealed, why not, seconds of the exec, seconds verify took to answer)."""
    from engine.stream.reader import open_indexed

    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "exec", "--sim", "--record",
                           str(out), "--", sys.executable, str(script), MODEL],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    exec_s = time.perf_counter() - t0
    if proc.returncode != 0:
        return False, f"exec exit {proc.returncode}: {proc.stderr.strip()[-300:]}", exec_s, 0.0
    paths = sorted(out.glob("*.jsonl.zst"))
    if not paths:
        return False, "no recording", exec_s, 0.0
    for path in paths:
        if open_indexed(path) is None:
            return False, f"{path.name}: no index", exec_s, 0.0
        summary = subprocess.run([sys.executable, "-m", "engine.cli", "summary", str(path)],
                                 env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
        if summary.returncode != 0 or "cut" in summary.stderr:
            return False, f"{path.name}: summary {summary.returncode} {summary.stderr[-200:]}", \
                exec_s, 0.0
    t0 = time.perf_counter()
    verify = subprocess.run([sys.executable, "-m", "engine.cli", "verify", str(paths[0])],
                            env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    verify_s = time.perf_counter() - t0
    lines = verify.stderr.strip().splitlines()
    if verify.returncode == 0 or len(lines) != 1 or "Traceback" in verify.stderr:
        return False, f"verify did not refuse in one line: {verify.stderr[-300:]}", exec_s, \
            verify_s
    return True, "", exec_s, verify_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--script", help="a program under tests/fixtures/attach/ to run instead")
    args = parser.parse_args()
    from engine.adapters.versions import installed_engine, installed_version

    version = installed_version()
    v1 = installed_engine() == "v1"
    script = ROOT / "tests" / "fixtures" / "attach" / (
        args.script or ("v1_rollout.py" if v1 else "verl_rollout.py"))
    sealed, exec_times, verify_times = 0, [], []
    for k in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            ok, why, exec_s, verify_s = one_run(script, Path(tmp))
        sealed += ok
        exec_times.append(exec_s)
        verify_times.append(verify_s)
        print(f"run {k + 1}: {'sealed' if ok else 'NOT sealed: ' + why}  exec {exec_s:.1f} s  "
              f"verify refused in {verify_s:.2f} s", flush=True)
    print(f"vLLM {version} ({'V1' if v1 else 'V0'}), {script.name}: sealed and indexed "
          f"{sealed} of {args.runs}; exec median {statistics.median(exec_times):.1f} s; "
          f"verify refused in at most {max(verify_times):.2f} s; load "
          f"{os.getloadavg()[0]:.1f}")
    return 0 if sealed == args.runs else 1


if __name__ == "__main__":
    raise SystemExit(main())
