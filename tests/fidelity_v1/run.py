"""Run the installed V1 release's `tests/v1/core/test_scheduler.py` bare and with the observatory attached to
every Scheduler (observatory_fidelity_plugin.py), and list the tests whose outcome changes.

    PYTHONHASHSEED=0 python -m tests.fidelity_v1.run [--policies off,full-isl,...] [-k EXPR]

Each run is its own pytest process over vLLM's file (from the cached sdist, vllm_tests.py),
with the repository on PYTHONPATH for the plugin, on the platform the observatory's sims run on
(vLLM's CPU platform, VLLM_TARGET_DEVICE=cpu; from 0.34, whose CPU platform refuses to start
without triton-cpu, the observatory's own: engine.adapters.v1.platform), offline, with
opt-125m's config in a local hub cache. Outcomes come from pytest's JUnit XML: passed, failed,
error or skipped per test id; a run in which no test passed (a collection error, a missing test
dependency) raises instead of comparing nothing. Prints one line per policy, then every test whose
outcome differs from the bare run's, with pytest's one-line reason.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from engine.adapters.v1.platform import PLATFORM_KEYS, sim_env
from tests.fidelity_v1.vllm_tests import SCHEDULER_TESTS, VERSION, hf_cache, tests_root

REPO = Path(__file__).resolve().parents[2]
POLICIES = ("off", "full-isl", "whole-context", "least-computed")
BARE = Path(__file__).with_name(f"bare-{VERSION}.txt")
"""The installed release's outcome of each test, bare, in this environment (`--write-bare`), one
file per release: CI compares the observed run against it instead of running vLLM's file
twice."""


class NothingRan(RuntimeError):
    """vLLM's file ran no test (a collection error, a missing test dependency): a run that
    proves nothing must not read as "0 changed"."""


def read_bare(path: Path = BARE) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            outcome, name = line.split(" ", 1)
            out[name] = outcome
    return out


def write_bare(outcomes: dict[str, tuple[str, str]], path: Path = BARE) -> None:
    lines = [f"# vLLM {VERSION} tests/v1/core/test_scheduler.py, bare, as tests/fidelity_v1/run.py "
             f"runs it (the sim's platform, offline,", "# opt-125m's config only): outcome and "
             "test id. Written by `python -m tests.fidelity_v1.run --write-bare`."]
    lines += [f"{outcome} {name}" for name, (outcome, _) in sorted(outcomes.items())]
    path.write_text("\n".join(lines) + "\n")


def run(policy: str | None, k: str | None = None, timeout_s: float = 1800.0
        ) -> tuple[dict[str, tuple[str, str]], str]:
    """{test id: (outcome, first line of the message)} and the plugin's summary line."""
    root = tests_root()
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", SCHEDULER_TESTS, "-q", "-p", "no:cacheprovider",
               "--noconftest", "-p", "observatory_fidelity_plugin", f"--junitxml={xml}",
               "-o", "junit_family=xunit1", "--rootdir", str(root)]
        if policy is not None:
            cmd.append(f"--observatory-policy={policy}")
        if k:
            cmd += ["-k", k]
        # the sim's platform: vLLM's CPU platform, or from 0.34 (whose CPU platform refuses
        # without triton-cpu) the observatory's (engine.adapters.v1.platform)
        platform = {k: v for k, v in sim_env().items() if k in PLATFORM_KEYS}
        sim_path = platform.pop("PYTHONPATH", "")  # the sim platform's plugin, if it has one
        env = dict(os.environ, PYTHONHASHSEED="0", **platform,
                   HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(hf_cache()),
                   # the plugin by its own name: `tests` is vLLM's package in this run
                   PYTHONPATH=os.pathsep.join([str(REPO), str(Path(__file__).parent),
                                               str(root), *filter(None, [sim_path])]))
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True,
                              timeout=timeout_s)
        if not xml.exists():
            raise RuntimeError(f"pytest wrote no report (exit {done.returncode}):\n"
                               f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        outcomes: dict[str, tuple[str, str]] = {}
        for case in ET.parse(xml).iter("testcase"):
            name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
            outcome, message = "passed", ""
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = {"failure": "failed"}.get(child.tag, child.tag)
                    message = (child.get("message") or "").splitlines()[0][:200] \
                        if child.get("message") else ""
                    break
            outcomes[name] = (outcome, message)
    ran = sum(outcome in ("passed", "failed") for outcome, _ in outcomes.values())
    if not ran or done.returncode not in (0, 1):
        # pytest exits 2-5 for an interrupted run, an internal or usage error, or no tests
        # collected: a collection error in vLLM's file lands here even with some tests run
        raise NothingRan(f"vLLM {VERSION}'s {SCHEDULER_TESTS} did not run (pytest exit "
                         f"{done.returncode}, {ran} tests run):\n{done.stdout[-3000:]}\n"
                         f"{done.stderr[-3000:]}")
    summary = next((line for line in done.stdout.splitlines()
                    if line.startswith("observatory fidelity:")), "")
    return outcomes, summary


def counts(outcomes: dict[str, tuple[str, str]]) -> str:
    tally: dict[str, int] = {}
    for outcome, _ in outcomes.values():
        tally[outcome] = tally.get(outcome, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(tally.items()))


def tally_line(observed: dict[str, tuple[str, str]], bare: dict[str, str]) -> str:
    """Tests run, passed, and those that fail bare too (listed, not hidden: vLLM's own)."""
    ran = sum(outcome in ("passed", "failed", "error") for outcome, _ in observed.values())
    passed = sum(outcome == "passed" for outcome, _ in observed.values())
    bare_failures = sum(outcome in ("failed", "error") for outcome in bare.values())
    return (f"vLLM {VERSION}: {ran} tests run, {passed} passed, {bare_failures} fail bare too "
            f"(tests/fidelity_v1/{BARE.name})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("-k", default=None, help="pytest -k expression")
    parser.add_argument("--show", action="store_true", help="also list the bare failures")
    parser.add_argument("--committed-bare", action="store_true",
                        help=f"compare with {BARE.name} instead of running vLLM bare")
    parser.add_argument("--write-bare", action="store_true",
                        help=f"write the bare outcomes to {BARE.name}")
    args = parser.parse_args(argv)
    if args.committed_bare:
        bare = {name: (outcome, "") for name, outcome in read_bare().items()}
    else:
        bare, _ = run(None, args.k)
    print(f"bare: {counts(bare)}", flush=True)
    if args.write_bare:
        write_bare(bare)
    if args.show:
        for name, (outcome, message) in sorted(bare.items()):
            if outcome != "passed":
                print(f"  {name}: {outcome}: {message}", flush=True)
    for policy in filter(None, args.policies.split(",")):
        observed, summary = run(policy, args.k)
        changed = {name: observed.get(name, ("missing", "")) for name in bare
                   if observed.get(name, ("missing", ""))[0] != bare[name][0]}
        print(f"{policy}: {counts(observed)}; {summary}; {len(changed)} changed", flush=True)
        print(f"  {tally_line(observed, {n: o for n, (o, _) in bare.items()})}", flush=True)
        for name, (outcome, message) in sorted(changed.items()):
            print(f"  {name}: {bare[name][0]} -> {outcome}: {message}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
