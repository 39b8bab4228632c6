"""Which family each vLLM release resolves to, measured: install it, run it, verify it.

For each release (default: every V1 release from 0.18.0 to 0.34.0), in its own uv venv under
--root (deleted after its run unless --keep; uv links wheels from one shared cache):

1. install `vllm==RELEASE` (and the row's companion pins) and this checkout (`-e .[test]`),
   with overrides/<extra>.txt as `--override` where a row of the same minor line has one;
2. the family: a release the table (engine/adapters/releases.json) resolves runs as its row
   says. A release it does not know, or refuses, is tried with every family of its engine kind
   (OBSERVATORY_TRY_RELEASE names a known row: its family and its platform), the nearest
   release's first: a family passes when both runs below finish their steps, the bug shows
   under `off` and not under the fix (V1: fewer preemptions of one request; V0: no abort),
   and the recording verifies;
3. the preset under `off` (recorded) and under the fix: V1 `v1-thrash` for --steps steps and
   `whole-context` (the most preemptions of one request under each: the thrash and the fix);
   V0 `seed-5578` and `reserve` (the step vLLM aborts at under `off`, and the steps `reserve`
   runs without one);
4. `observatory verify` on the `off` recording: the same release re-runs it to the same
   decisions.

It prints one line per release as it goes: the family it resolves to with the figures, or,
for each family tried, the first line of what broke (`internal error at step 70 in hook
allocate_slots ... unexpected keyword argument 'num_local_computed_tokens'`: the hook and the
vLLM name that changed). `--write` stores each result as the release's row of the table (the
date, the figures; a refusal names what broke), from which `observatory versions` and
docs/versions.md are made.

Release day: `python3.11 bench/v1_releases.py 0.35.0` (about 2 minutes from a warm cache, more
when the release brings a new torch), then `--write` and a commit if it resolves.

Run: python3.11 bench/v1_releases.py [--root DIR] [--steps N] [--keep] [--write] [RELEASE ...]
"""

from __future__ import annotations

import argparse
import datetime
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

from engine.adapters import release_table  # noqa: E402
from engine.adapters.versions import (KNOWN, TRY_FAMILY, TRY_RELEASE,  # noqa: E402
                                      Release)

RANGE = ("0.18.0", "0.18.1", "0.19.0", "0.19.1", "0.20.0", "0.20.1", "0.20.2", "0.21.0",
         "0.22.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0",
         "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")

KIND = {  # what each engine kind's bench runs: preset, the fix, steps for the fix's run
    "v1": ("v1-thrash", "whole-context"),
    "v0": ("seed-5578", "reserve"),
}


PAST_ABORT = 100
"""V0: the fix runs this many steps past the step `off` aborted at (no further: the seed's run is
minutes per thousand steps on a loaded machine, and surviving the abort is the claim)."""

numbers = release_table.numbers


def engine_of(version: str) -> str:
    """V0's LLMEngine to 0.10.x; V1 only from 0.11."""
    return "v0" if numbers(version)[:2] <= (0, 10) else "v1"


def candidates(version: str) -> list[Release | str | None]:
    """[None] for a release the table resolves (it runs as its row says); else each family
    module no row uses yet (a str for OBSERVATORY_TRY_FAMILY: on vLLM's platform, then on the
    observatory's), then one known row per (family, platform) of its engine kind, the nearest
    release's first."""
    known = next((r for r in KNOWN if r.version == version), None)
    if known is not None and not os.environ.get(TRY_RELEASE):
        return [None]
    kind = engine_of(version)
    target = numbers(version)

    def distance(row: Release) -> tuple:
        mine = numbers(row.version)
        return (abs(_flat(mine) - _flat(target)), -_flat(mine))

    seen: set[tuple[str, bool]] = set()
    rows: list[Release | str | None] = []
    for row in sorted((r for r in KNOWN if r.engine == kind), key=distance):
        if (row.family, row.sim_plugin) not in seen:
            seen.add((row.family, row.sim_plugin))
            rows.append(row)
    used = {family for family, _ in seen}
    new: list[Release | str | None] = []
    for module in sorted((ROOT / "engine" / "adapters" / kind).glob("family_*.py")):
        family = module.stem.removeprefix("family_")
        if family not in used:
            new += [family] + ([f"{family}+plugin"] if kind == "v1" else [])
    return new + rows  # a family no row uses yet is the one just written for a new release


def _flat(parts: tuple[int, ...]) -> int:
    padded = (parts + (0, 0, 0, 0))[:4]
    return ((padded[0] * 100 + padded[1]) * 100 + padded[2]) * 100 + padded[3]


def uv() -> str:
    found = shutil.which("uv")
    if found is None:
        sys.exit("v1_releases: needs uv on PATH (pip install uv)")
    return found


def override_for(release: str) -> list[str]:
    """The override file of the CI row on the same minor line, if it has one."""
    for row in KNOWN:
        file = ROOT / "overrides" / f"{row.extra}.txt"
        if row.extra and numbers(row.version)[:2] == numbers(release)[:2] and file.exists():
            return ["--override", str(file)]
    return []


V0_PINS = {  # minor line -> the companions its wheels leave open and their 2026 releases break
    (0, 5): ["transformers>=4.41.2,<4.44", "tokenizers>=0.19,<0.20", "numpy>=1.26,<2",
             "outlines>=0.0.43,<0.1", "pyarrow<17", "datasets<3", "pyairports"],
    (0, 6): ["transformers>=4.45,<4.47", "numpy>=1.26,<2"],
    (0, 7): ["transformers>=4.48.2,<4.50", "numpy>=1.26,<2"],
    (0, 8): ["transformers>=4.50,<4.52", "numpy>=1.26,<2"],
    (0, 9): ["transformers>=4.52,<4.54", "numpy>=1.26,<2"],
    (0, 10): ["transformers>=4.55,<4.57"],
}
"""A V0 release's companion pins when its row has none (bench/v0_releases.py): the CI extras'
bounds (pyproject.toml) widened to the transformers each line's wheels ask for."""


def pins_for(release: str, given: list[str]) -> list[str]:
    """Companion pins: those given, else the known row's, else its V0 minor line's (a V0
    release's wheel leaves transformers and numpy open, and their newest releases break it)."""
    if given or engine_of(release) == "v1":
        return given
    row = next((r for r in KNOWN if r.version == release), None)
    if row is not None and row.pins:
        return list(row.pins)
    return list(V0_PINS.get(numbers(release)[:2], []))


def install(release: str, root: Path, pins: list[str]) -> tuple[Path, float, str]:
    venv = root / f"bench-vllm-{release}"
    python = venv / "bin" / "python"
    if (venv / ".complete").exists():
        subprocess.run([uv(), "pip", "install", "-q", "-p", str(python), "--no-deps", "-e",
                        str(ROOT)], check=True)
        return python, 0.0, ""
    shutil.rmtree(venv, ignore_errors=True)
    start = time.monotonic()
    subprocess.run([uv(), "venv", "-q", "--seed", "-p", "python3.11", str(venv)], check=True)
    import fcntl

    with open(root / ".install.lock", "w") as lock:  # installs one at a time (the network,
        fcntl.flock(lock, fcntl.LOCK_EX)  # uv's cache) when two benches share a root
        done = subprocess.run([uv(), "pip", "install", "-q", "-p", str(python),
                               f"vllm=={release}", *pins, "-e", f"{ROOT}[test]",
                               *override_for(release)],
                              capture_output=True, text=True)
    if done.returncode != 0:
        return python, time.monotonic() - start, f"install failed: {install_cause(done.stderr)}"
    (venv / ".complete").touch()
    return python, time.monotonic() - start, ""


def install_cause(stderr: str) -> str:
    """uv's reason in one line: the pin the index cannot satisfy when it names one ("the index
    has no xgrammar==0.1.16, which vllm==0.8.2 pins"), else its first `because` line."""
    import re

    text = " ".join(stderr.split())
    missing = re.search(r"there is no version of ([\w.-]+)(?:\{[^}]*\})?==([\w.+-]+) and "
                        r"([\w.-]+==[\w.+-]+) depends on", text)
    if missing:
        package, version, wheel = missing.groups()
        return f"the index has no {package}=={version}, which {wheel} pins"
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return next((line for line in lines if "ecause" in line),
                next((line for line in lines if "No solution" in line),
                     lines[-1] if lines else "?"))


def observatory(python: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "engine.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=1800)


def what_broke(done: subprocess.CompletedProcess) -> str:
    """The line that says what broke: the observatory's own error (it names the hook and the
    exception vLLM's changed name raised), else vLLM's last exception line, else the last."""
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    for marker in ("internal error", "observatory: error", "Error:", "Error"):
        found = next((line for line in lines if marker in line), None)
        if found is not None:
            return found
    return lines[-1] if lines else f"exit {done.returncode}"


def trial(python: Path, kind: str, row: Release | str | None, steps: int, work: Path) -> dict:
    """The preset under `off` (recorded) and the fix, then `verify`, in one child process of
    the release's venv (`--child`): vLLM is imported once, not three times."""
    env = {k: v for k, v in os.environ.items() if k not in (TRY_RELEASE, TRY_FAMILY)}
    env["PYTHONHASHSEED"] = "0"
    if isinstance(row, str):
        env[TRY_FAMILY] = row
    elif row is not None:
        env[TRY_RELEASE] = row.version
    out: dict = {"as": row.version if isinstance(row, Release) else None,
                 "plugin": isinstance(row, str) and row.endswith("+plugin")}
    shown = observatory(python, env, "versions").stdout
    out["family"] = next((line.split("adapter family ")[1].rstrip(")")
                          for line in shown.splitlines() if "adapter family" in line), "-")
    preset, fix = KIND[kind]
    done = subprocess.run([str(python), __file__, "--child", preset, fix, str(steps),
                           str(work)], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=3600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        out["error"] = f"exit {done.returncode}: {what_broke(done)[:240]}"
        return out
    result = json.loads(lines[-1])
    if "error" in result:
        out["error"] = result["error"]
        return out
    for name in ("off", "fix"):
        summary = result[name]
        out[f"{name}_steps"] = summary["steps"]
        out[name] = (summary["max_preemptions_per_request"] if kind == "v1"
                     else summary.get("abort_step"))
    out["verify"] = result["verify"]
    return out


def child(preset: str, fix: str, steps: int, work: Path) -> int:
    """In the release's venv: `observatory run` under off (recorded) and under the fix, then
    `observatory verify`, through the CLI's own entry point; one JSON line on stdout."""
    import contextlib
    import io

    from engine.cli import main as cli

    record = work / "off.jsonl.zst"
    result: dict = {}
    for policy in ("off", fix):
        abort = result.get("off", {}).get("abort_step")
        if policy != "off" and abort is not None:
            steps = min(steps, abort + PAST_ABORT)  # the fix outlives off's abort: enough
        args = ["run", "--preset", preset, "--max-steps", str(steps), "--policy", policy,
                "--json"] + (["--record", str(record)] if policy == "off" else ["--no-record"])
        shown, errors = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(errors):
            code = cli(args)
        text = shown.getvalue()
        if code not in (0, 3) or "{" not in text:
            lines = [line for line in (errors.getvalue() + text).splitlines() if line.strip()]
            broke = next((line for line in lines if "internal error" in line or
                          "observatory: error" in line), lines[-1] if lines else f"exit {code}")
            result["error"] = f"{policy}: exit {code}: {broke.strip()[:240]}"
            print(json.dumps(result), flush=True)
            return 0
        result["off" if policy == "off" else "fix"] = json.loads(
            text[text.index("{"):text.rindex("}") + 1])
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(shown):
        code = cli(["verify", str(record)])
    lines = [line for line in shown.getvalue().splitlines() if line.strip()]
    result["verify"] = "ok" if code == 0 else f"exit {code}: {(lines or ['?'])[-1][:160]}"
    print(json.dumps(result), flush=True)
    return 0


def failure(kind: str, result: dict) -> str:
    """What a family's trial got wrong ("" when it passed): an error, a recording that does
    not verify, or the bug and its fix not both seen. A family that runs a release but cannot
    switch one of vLLM's own rules off runs `off` as the fix (0.19's `scheduler_reserve_full_isl`,
    on by default, under 0.18's family, which does not know it): it finishes and verifies, and
    only the figures show that `off` is not off."""
    if "error" in result:
        return result["error"]
    if result.get("verify") != "ok":
        return f"verify {result.get('verify')}"
    if kind == "v0":  # the seed aborts under off; reserve runs every step
        if result["off"] is None or result["fix"] is not None:
            return (f"the seed's abort not seen under off and avoided under reserve (off "
                    f"aborts at {result['off']}, reserve at {result['fix']})")
        return ""
    if result["off_steps"] != result["fix_steps"]:
        return f"off ran {result['off_steps']} steps, the fix {result['fix_steps']}"
    if result["off"] <= result["fix"]:
        return (f"no thrash under off: most preemptions of one request {result['off']} off / "
                f"{result['fix']} fix (a rule of vLLM's the family cannot switch off?)")
    return ""


def line(release: str, kind: str, result: dict, seconds: float) -> str:
    if kind == "v1":
        figures = f"most preemptions of one request {result['off']} off / {result['fix']} fix"
    else:
        figures = (f"off aborts at step {result['off']}, reserve "
                   f"{'runs ' + str(result['fix_steps']) + ' steps' if result['fix'] is None else 'aborts at ' + str(result['fix'])}")
    return (f"{release}: resolves to {result['family']}"
            + (f" (as {result['as']})" if result.get("as") else "")
            + f"; {figures}; verify {result['verify']} ({seconds:.0f} s install)")


def bench_row(release: str, kind: str, result: dict, seconds: float, steps: int,
              load: float, pins: list[str]) -> release_table.Row:
    preset, fix = KIND[kind]
    row = next((r for r in KNOWN if r.version == (result.get("as") or release)), None)
    figures = release_table.Bench(preset=preset, steps=steps, fix=fix, verify=result["verify"],
                                  install_s=round(seconds, 1), load=round(load, 2))
    if kind == "v1":
        figures.off_max_preemptions, figures.fix_max_preemptions = result["off"], result["fix"]
    else:
        figures.off_abort_step, figures.fix_steps = result["off"], result["fix_steps"]
    own = next((r for r in release_table.load() if r.version == release), None)
    return release_table.Row(
        version=release, engine=kind, family=result["family"],
        extra=own.extra if own is not None else "", pins=pins,
        override=own.override if own is not None else False,
        sim_plugin=row.sim_plugin if row is not None else bool(result.get("plugin")),
        earned=datetime.date.today().isoformat(), bench=figures)


def store(root: Path, row: release_table.Row) -> None:
    """`row` into the table file, one bench at a time (two may share a root: V0 and V1)."""
    import fcntl

    with open(root / ".table.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        release_table.upsert(row)


def main(default: tuple[str, ...] = RANGE) -> int:
    if sys.argv[1:2] == ["--child"]:
        preset, fix, steps, work = sys.argv[2:6]
        return child(preset, fix, int(steps), Path(work))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("releases", nargs="*", default=list(default))
    parser.add_argument("--root", type=Path,
                        default=Path.home() / ".cache" / "vllm-observatory" / "v1-releases")
    parser.add_argument("--steps", type=int, default=None,
                        help="steps per run (default: 300 for V1, 1,200 for V0: past the "
                             "seed's abort)")
    parser.add_argument("--pins", default="",
                        help="companion requirements for a release the table has none for, "
                             "comma-separated ('transformers<4.52,numpy<2')")
    parser.add_argument("--keep", action="store_true", help="keep each venv after its run")
    parser.add_argument("--write", action="store_true",
                        help="store each result in engine/adapters/releases.json")
    args = parser.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    given = [p for p in args.pins.split(",") if p]
    for release in args.releases:
        kind = engine_of(release)
        steps = args.steps or (300 if kind == "v1" else 1200)
        load = os.getloadavg()[0]
        pins = pins_for(release, given)
        python, seconds, failed = install(release, args.root, pins)
        if failed:
            print(f"{release}: refused: {failed[:240]}", flush=True)
            if args.write and release not in {r.version for r in KNOWN}:
                cause = failed.removeprefix("install failed: ")[:200]
                store(args.root, release_table.Row(
                    version=release, engine=kind, refused=f"its install fails: {cause}"))
            continue
        broke: list[str] = []
        result: dict = {}
        for row in candidates(release):
            with tempfile.TemporaryDirectory() as work:
                result = trial(python, kind, row, steps, Path(work))
            wrong = failure(kind, result)
            if not wrong:
                break
            broke.append(f"{result.get('family', '-')}"
                         + (f" (as {row.version})" if isinstance(row, Release) else
                            " (the sim's platform)" if result.get("plugin") else "") + ": "
                         + wrong)
            result = {}
        if result:
            print(line(release, kind, result, seconds), flush=True)
            if args.write:
                store(args.root, bench_row(release, kind, result, seconds, steps, load,
                                               pins))
        else:
            print(f"{release}: no family runs it:", flush=True)
            for entry in broke:
                print(f"  {entry}", flush=True)
            if args.write and release not in {r.version for r in KNOWN}:
                store(args.root, release_table.Row(
                    version=release, engine=kind,
                    refused="no family runs it: " + "; ".join(broke)[:300]))
        if not args.keep:
            shutil.rmtree(args.root / f"bench-vllm-{release}", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
