"""Regenerate the example recordings in this directory, then `verify` each one.

Each file is made by `observatory run` itself (the commands are in README.md here), so the
examples are whatever the current recorder writes: schema, Check lines and zstd checksums.

    PYTHONPATH=. python recordings/make_examples.py            # all of them, ~1-2 min each
    PYTHONPATH=. python recordings/make_examples.py seed-5578-off --no-verify

Each vLLM release makes its own: the seven seed-5578 files (two of them on the preset fitted to
the seed's GPU log) come from 0.5.0.post1, and each
other supported release makes `seed-5578-off-vllmNNN` in a venv of its extra
(`pip install -e '.[vllmNNN,test]'`). vLLM 0.33 (the V1 engine, `vllm033`) makes the three
`v1-thrash-*` files, the two `v1-head-of-line-*` files and the two `v1-async-seats-*` files. A file verifies only under the release that made it.

A file is written under a temporary name and renamed over the old one only after `run`
ended as expected (exit 0, or 3 for the runs that abort) and `verify` passed, so a failed
regeneration leaves the shipped file as it was.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

SEED = ["--preset", "seed-5578"]
FITTED = ["--preset", "seed-5578-fitted"]
DEFAULT_EXAMPLES: dict[str, list[str]] = {
    "seed-5578-off": [*SEED, "--policy", "off"],
    "seed-5578-strict": [*SEED, "--policy", "strict", "--max-steps", "1600"],
    "seed-5578-watermark": [*SEED, "--policy", "watermark:0.5", "--max-steps", "1600"],
    "seed-5578-off-then-strict": [*SEED, "--policy", "off", "--toggle-at", "500:strict",
                                  "--max-steps", "1600"],
    "seed-5578-off-then-strict-late": [*SEED, "--policy", "off", "--toggle-at", "640:strict"],
    # the sim calibrated to the seed's GPU log (engine/spec.py), and the fix on that very run
    "seed-5578-fitted-off": [*FITTED, "--policy", "off"],
    "seed-5578-fitted-strict": [*FITTED, "--policy", "strict", "--max-steps", "6000"],
    # the policy that cannot abort: admits only what GPU + CPU can hold at worst
    "seed-5578-reserve": [*SEED, "--policy", "reserve", "--max-steps", "1600"],
}
# made on the release verl pins as well (the one where `strict` does not hold)
RESERVE_EXTRAS = ("vllm063",)
THRASH = ["--preset", "v1-thrash"]
V1_EXAMPLES: dict[str, list[str]] = {
    # vLLM's V1 engine (0.33, the vllm033 extra): #25538 as reported, and the fix
    "v1-thrash-off": [*THRASH, "--policy", "off"],
    "v1-thrash-whole-context": [*THRASH, "--policy", "whole-context"],
    # the fix switched on in the middle of the thrash (request 12 preempted for the 20th time)
    "v1-thrash-off-then-whole-context": [*THRASH, "--policy", "off", "--toggle-at",
                                         "3000:whole-context"],
    # #31731's head-of-line blocking on 0.33's defaults, and PR #35852's skip-and-continue
    "v1-head-of-line-off": ["--preset", "v1-head-of-line", "--policy", "off"],
    "v1-head-of-line-skip-and-continue": ["--preset", "v1-head-of-line", "--policy",
                                          "skip-and-continue"],
    # #45257 under async scheduling (max_tokens=1 requests, max_num_seqs 4), and PR #45339's
    # per-iteration count
    "v1-async-seats-off": ["--preset", "v1-async-seats", "--policy", "off"],
    "v1-async-seats-per-iteration-count": ["--preset", "v1-async-seats", "--policy",
                                           "per-iteration-count"],
}


V1_MAKER = "vllm033"  # the V1 examples' release (any V1 release makes them with `examples()`)


def every_example() -> dict[str, tuple[str, list[str]]]:
    """Every shipped example: its name, the extra whose venv makes it, and its `run` flags.
    recordings/MANIFEST lists the same files, and tests read only what it lists
    (tests/shipped.py; a test holds the two together)."""
    from engine.adapters.versions import DEFAULT, SUPPORTED

    made = {name: (DEFAULT.extra, flags) for name, flags in DEFAULT_EXAMPLES.items()}
    made.update({name: (V1_MAKER, flags) for name, flags in V1_EXAMPLES.items()})
    for release in SUPPORTED:
        if release.engine != "v0" or release == DEFAULT:
            continue
        made[f"seed-5578-off-{release.extra}"] = (release.extra, [*SEED, "--policy", "off"])
        if release.extra in RESERVE_EXTRAS:
            made[f"seed-5578-reserve-{release.extra}"] = (
                release.extra, [*SEED, "--policy", "reserve", "--max-steps", "1600"])
    return made


def examples() -> dict[str, list[str]]:
    """The examples the installed vLLM release makes (engine.adapters.versions)."""
    from engine.adapters.versions import require_supported

    release = require_supported()
    if release.engine == "v1":
        return dict(V1_EXAMPLES)
    return {name: flags for name, (extra, flags) in every_example().items()
            if extra == release.extra}


def observatory(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True)


def make(name: str, flags: list[str], verify: bool) -> bool:
    final = HERE / f"{name}.jsonl.zst"
    temp = HERE / f".{name}.new.jsonl.zst"
    ran = observatory("run", *flags, "--record", str(temp))
    if ran.returncode not in (0, 3):
        print(f"{name}: run failed (exit {ran.returncode}): {ran.stderr.strip()[-400:]}")
        temp.unlink(missing_ok=True)
        return False
    if verify:
        checked = observatory("verify", str(temp))
        if checked.returncode != 0:
            print(f"{name}: verify failed: {(checked.stdout + checked.stderr).strip()[-400:]}")
            temp.unlink(missing_ok=True)
            return False
    temp.replace(final)
    print(f"{name}: {final.stat().st_size:,} bytes" + (", verified" if verify else ""))
    return True


def main() -> int:
    from engine.errors import ConfigError

    try:
        chosen = examples()
    except ConfigError as exc:
        print(f"make_examples: {exc}", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"which ones (default all): {', '.join(chosen)}")
    parser.add_argument("--no-verify", action="store_true", help="skip `verify`")
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(chosen))
    if unknown:
        parser.error(f"unknown example(s) {', '.join(unknown)}: use {', '.join(chosen)}")
    ok = [make(name, chosen[name], not args.no_verify) for name in (args.names or chosen)]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
