"""One release's run: headless `observatory run` in that release's venv, as a subprocess.

The workload is the run spec the command line resolved once (the same for every release),
given to the child as a `--config` file; the child records to a file whose bytes come back
with its exit status, so a run on a Ray worker elsewhere returns its recording to the driver.
`run_release` never raises: a release that cannot build its venv or run the workload is a
failed row, and the others go on.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

import msgspec

from engine.adapters.versions import KNOWN, lacks_full_isl
from engine.exit_status import ExitStatus
from engine.releases import venvs

TIMEOUT_S = 3600.0


class ReleaseOutcome(msgspec.Struct, kw_only=True):
    version: str
    status: str  # "ok" (the run finished or vLLM aborted: a result) or "failed"
    message: str = ""  # a failed run's one line
    exit_status: int | None = None
    recording: bytes = b""  # the recording's file bytes
    seconds: float = 0.0  # wall seconds of the child (building a venv not counted)


def _one_line(text: str, returncode: int) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    found = next((line for line in lines if line.startswith("observatory: error")), None)
    return (found or (lines[-1] if lines else f"exit {returncode}"))[:300]


def child_env(clone: Path = venvs.CLONE) -> dict[str, str]:
    """This process's environment, with the hash seed V1 sims need from interpreter start, and
    this clone first on the path (the venv's editable install may point at another clone)."""
    path = os.pathsep.join(p for p in (str(clone), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": path,
            "OBSERVATORY_NO_REEXEC": "1"}


def run_release(version: str, root: str, config_toml: str) -> bytes:
    """Build (or reuse) `version`'s venv under `root` and run the workload (`config_toml`, a
    RunSpec as a --config file's text) through it; a msgpack ReleaseOutcome."""
    outcome = ReleaseOutcome(version=version, status="failed")
    release = next((r for r in KNOWN if r.version == version), None)
    try:
        if release is None:
            raise LookupError(f"vLLM {version} is not in this observatory's release table")
        python = venvs.ensure(release, Path(root))
        with tempfile.TemporaryDirectory(prefix="observatory-release-") as work:
            config = Path(work) / "spec.toml"
            config.write_text(config_toml)
            record = Path(work) / "run.jsonl.zst"
            started = time.perf_counter()
            done = subprocess.run(
                [str(python), "-m", "engine.cli", "run", "--config", str(config),
                 "--record", str(record)],
                env=child_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
            outcome.seconds = round(time.perf_counter() - started, 2)
            outcome.exit_status = done.returncode
            if done.returncode in (ExitStatus.OK, ExitStatus.ABORTED) and record.is_file():
                outcome.status = "ok"
                outcome.recording = record.read_bytes()
            else:
                outcome.message = _one_line(done.stderr + "\n" + done.stdout, done.returncode)
    except subprocess.TimeoutExpired:
        outcome.message = f"the run took more than {TIMEOUT_S:.0f} s"
    except Exception as exc:  # an ObservatoryError building the venv, an OSError: one row
        text = str(exc).strip()
        outcome.message = (text.splitlines()[0] if text else type(exc).__name__)[:300]
    return msgspec.msgpack.encode(outcome)


def as_shipped(spec, release):  # -> (RunSpec, note)
    """`spec` as `release`'s own scheduler can take it, and what changed, in words ("" for
    nothing). A setting that release's vLLM has no option for is left out rather than played by
    the observatory's hook (0.18 has no `scheduler_reserve_full_isl`, which vLLM turns on by
    default from 0.19): the question is what each release's own scheduler does with the
    workload, and that release would run it without. A policy (`--policy full-isl`) is the
    observatory's, and stays one on every release."""
    import msgspec

    if not spec.scheduler_reserve_full_isl or not lacks_full_isl(release):
        return spec, ""
    return (msgspec.structs.replace(spec, scheduler_reserve_full_isl=False),
            f"vLLM {release.version} has no full-ISL option (scheduler_reserve_full_isl, on "
            f"by default from 0.19): run as it ships, without it")


def decode(data: bytes) -> ReleaseOutcome:
    return msgspec.msgpack.decode(data, type=ReleaseOutcome)


def run_on_ray(configs: dict[str, str], root: str, capacity: int):
    """Each release (`configs`: version -> its --config text) as one Ray task (`num_cpus=1`),
    at most `capacity` at once; yields ReleaseOutcomes as they finish. Closing the generator
    cancels what is in flight."""
    import ray

    remote = ray.remote(num_cpus=1, max_retries=0)(run_release)
    waiting = list(configs)
    in_flight: dict = {}
    try:
        while waiting or in_flight:
            while waiting and len(in_flight) < capacity:
                version = waiting.pop(0)
                in_flight[remote.remote(version, root, configs[version])] = version
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in ready:
                version = in_flight.pop(ref)
                try:
                    yield decode(ray.get(ref))
                except Exception as exc:  # a lost worker: this release's row says so
                    text = str(exc).strip()
                    yield ReleaseOutcome(version=version, status="failed",
                                         message=(text.splitlines()[0] if text else
                                                  type(exc).__name__)[:300])
    finally:
        for ref in in_flight:
            ray.cancel(ref, force=True)
