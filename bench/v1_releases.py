"""Which V1 family each vLLM release resolves to, measured: install it, run it, verify it.

For each release (default: every V1 release from 0.18.0 to 0.34.0 on the index), in its own
uv venv under --root (kept between runs; uv links wheels from one shared cache):

1. install `vllm==RELEASE` and this checkout (`-e .[test]`), with overrides/<extra>.txt as
   `--override` where the family's row has one (0.34's flashinfer pin);
2. `observatory versions`: the family the release resolves to. A release no row covers yet is
   tried with the family of each neighbouring supported release (OBSERVATORY_TRY_RELEASE), the
   older first: a family passes when both runs below finish their steps and the recording
   verifies;
3. `observatory run --preset v1-thrash --max-steps STEPS` under `off` (recorded) and under
   `whole-context`: the most preemptions of one request under each (the thrash, and the fix);
4. `observatory verify` on the `off` recording: the same release re-runs it to the same
   decisions.

It prints one table row per release as it goes, and the table again at the end (Markdown). A
release that passes under a neighbour's family earns its place in that row's `covers`
(engine/adapters/versions.py). Outside CI: a cold run downloads each release's wheel (and its
torch when that changes), about 1 to 2 minutes per release from a warm cache.

Run: python3.11 bench/v1_releases.py [--root DIR] [--steps N] [RELEASE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.adapters.versions import SUPPORTED, TRY_RELEASE, Release, release_for  # noqa: E402

RANGE = ("0.18.0", "0.18.1", "0.19.0", "0.19.1", "0.20.0", "0.20.1", "0.20.2", "0.21.0",
         "0.22.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0",
         "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")


def numbers(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3])


def candidates(version: str) -> list[Release | None]:
    """The row that covers `version`, or the V1 rows on either side of it, older first."""
    covered = release_for(version)
    if covered is not None and not os.environ.get(TRY_RELEASE):
        return [None]  # resolves by itself
    v1 = sorted((r for r in SUPPORTED if r.engine == "v1"), key=lambda r: numbers(r.version))
    older = [r for r in v1 if numbers(r.version) < numbers(version)]
    newer = [r for r in v1 if numbers(r.version) > numbers(version)]
    return [r for r in (older[-1:] + newer[:1])]


def uv() -> str:
    found = shutil.which("uv")
    if found is None:
        sys.exit("v1_releases: needs uv on PATH (pip install uv)")
    return found


def override_for(release: str) -> list[str]:
    """The override file of the supported row on the same minor line, if it has one."""
    for row in SUPPORTED:
        file = ROOT / "overrides" / f"{row.extra}.txt"
        if numbers(row.version)[:2] == numbers(release)[:2] and file.exists():
            return ["--override", str(file)]
    return []


def install(release: str, root: Path) -> tuple[Path, float, str]:
    venv = root / f"bench-vllm-{release}"
    python = venv / "bin" / "python"
    if (venv / ".complete").exists():
        subprocess.run([uv(), "pip", "install", "-q", "-p", str(python), "--no-deps", "-e",
                        str(ROOT)], check=True)
        return python, 0.0, ""
    shutil.rmtree(venv, ignore_errors=True)
    start = time.monotonic()
    subprocess.run([uv(), "venv", "-q", "--seed", "-p", "python3.11", str(venv)], check=True)
    done = subprocess.run([uv(), "pip", "install", "-q", "-p", str(python),
                           f"vllm=={release}", "-e", f"{ROOT}[test]", *override_for(release)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return python, time.monotonic() - start, f"install failed: {tail}"
    (venv / ".complete").touch()
    return python, time.monotonic() - start, ""


def observatory(python: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "engine.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=1800)


def trial(python: Path, release: Release | None, steps: int, work: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != TRY_RELEASE}
    env["PYTHONHASHSEED"] = "0"
    if release is not None:
        env[TRY_RELEASE] = release.version
    out: dict = {}
    shown = observatory(python, env, "versions").stdout
    out["family"] = next((line.split("adapter family ")[1].rstrip(")")
                          for line in shown.splitlines() if "adapter family" in line), "-")
    record = work / "off.jsonl.zst"
    for policy in ("off", "whole-context"):
        args = ["run", "--preset", "v1-thrash", "--max-steps", str(steps), "--policy", policy,
                "--json"] + (["--record", str(record)] if policy == "off" else ["--no-record"])
        done = observatory(python, env, *args)
        if done.returncode != 0:
            line = (done.stderr.strip().splitlines() or ["?"])[-1]
            out["error"] = f"{policy}: exit {done.returncode}: {line[:160]}"
            return out
        summary = json.loads(done.stdout[done.stdout.index("{"):done.stdout.rindex("}") + 1])
        out[policy] = summary["max_preemptions_per_request"]
        out[f"{policy}_steps"] = summary["steps"]
    done = observatory(python, env, "verify", str(record))
    out["verify"] = "ok" if done.returncode == 0 else \
        f"exit {done.returncode}: {(done.stdout + done.stderr).strip().splitlines()[-1][:120]}"
    return out


def row(release: str, seconds: float, result: dict) -> str:
    if "error" in result:
        return f"| {release} | {result.get('family', '-')} | - | - | - | {result['error']} |"
    ok = result["verify"] == "ok" and result["off_steps"] == result["whole-context_steps"]
    return (f"| {release} | {result['family']} | {result['off']} | {result['whole-context']} | "
            f"{result['verify']} | {'pass' if ok else 'FAIL'} ({seconds:.0f} s install) |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("releases", nargs="*", default=list(RANGE))
    parser.add_argument("--root", type=Path,
                        default=Path.home() / ".cache" / "vllm-observatory" / "v1-releases")
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    header = ("| release | family | most preemptions of one request, off | same, "
              "whole-context | verify | result |\n|---|---|---|---|---|---|")
    print(header, flush=True)
    rows = []
    for release in args.releases:
        python, seconds, failed = install(release, args.root)
        if failed:
            rows.append(f"| {release} | - | - | - | - | {failed[:160]} |")
            print(rows[-1], flush=True)
            continue
        result: dict = {}
        for candidate in candidates(release):
            with tempfile.TemporaryDirectory() as work:
                result = trial(python, candidate, args.steps, Path(work))
            if "error" not in result and result["verify"] == "ok":
                break
        rows.append(row(release, seconds, result))
        print(rows[-1], flush=True)
    print("\n" + header)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
