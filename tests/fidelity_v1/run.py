"""Run the installed vLLM's `tests/v1/core/test_scheduler.py` bare and with the observatory
attached to every Scheduler (observatory_fidelity_plugin.py), and list the tests whose outcome
changes.

    PYTHONHASHSEED=0 python -m tests.fidelity_v1.run [--policies off,full-isl,...] [-k EXPR]

Each run is its own pytest process over vLLM's file (from the cached sdist, vllm_tests.py),
with the repository on PYTHONPATH for the plugin, on vLLM's CPU platform
(VLLM_TARGET_DEVICE=cpu, as the observatory's sims run), offline, with opt-125m's config in a
local hub cache. Outcomes come from pytest's JUnit XML:
passed, failed, error or skipped per test id. Prints one line per policy, then every test whose
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

from tests.fidelity_v1.vllm_tests import SCHEDULER_TESTS, VERSION, hf_cache, tests_root

REPO = Path(__file__).resolve().parents[2]
POLICIES = ("off", "full-isl", "whole-context", "least-computed")
BARE = Path(__file__).with_name(f"bare-{VERSION}.txt")
"""vLLM's outcome of each test, bare, in this environment (`--write-bare`): CI compares the
observed run against it instead of running vLLM's file twice."""


def read_bare(path: Path = BARE) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            outcome, name = line.split(" ", 1)
            out[name] = outcome
    return out


def write_bare(outcomes: dict[str, tuple[str, str]], path: Path = BARE) -> None:
    lines = [f"# vLLM {VERSION} tests/v1/core/test_scheduler.py, bare, as "
             "tests/fidelity_v1/run.py runs it (CPU platform, offline,",
             "# opt-125m's config only): outcome and test id. "
             "Written by `python -m tests.fidelity_v1.run --write-bare`."]
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
        env = dict(os.environ, PYTHONHASHSEED="0", VLLM_TARGET_DEVICE="cpu",
                   HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(hf_cache()),
                   # the plugin by its own name: `tests` is vLLM's package in this run
                   PYTHONPATH=os.pathsep.join([str(REPO), str(Path(__file__).parent),
                                               str(root)]))
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
    summary = next((line for line in done.stdout.splitlines()
                    if line.startswith("observatory fidelity:")), "")
    return outcomes, summary


def counts(outcomes: dict[str, tuple[str, str]]) -> str:
    tally: dict[str, int] = {}
    for outcome, _ in outcomes.values():
        tally[outcome] = tally.get(outcome, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(tally.items()))


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
        for name, (outcome, message) in sorted(changed.items()):
            print(f"  {name}: {bare[name][0]} -> {outcome}: {message}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
