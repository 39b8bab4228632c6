"""A hit's repro bundle: one directory that says what happened and fails while it still does.

    trace.jsonl          the minimal workload (Mooncake rows: `--trace` replays it)
    config.toml          every engine setting (`observatory run --config config.toml`, run from
                         the bundle's directory: the config names the trace by file name)
    case.json            the same case as the hunt holds it (what `rerun` reads)
    recording.jsonl.zst  the minimal run, recorded (`observatory verify` replays it; it finds
                         the trace by its absolute path, so verify it where it was written)
    test_repro.py        a stand-alone pytest: it fails while the detector still fires
    README.md            one paragraph: what happened, at which step, under which settings

The recording is made by a fresh run of the minimal case in the process that writes the
bundle, so a bundle also proves the hit reproduces outside the worker that found it.
"""

from __future__ import annotations

import re
from pathlib import Path

from engine.hunt import case as case_io
from engine.hunt.case import CONFIG_NAME, Case
from engine.hunt.detectors import Hit
from engine.hunt.runner import RECORDING_NAME, Outcome, run_case
from engine.sweep import toml_out

CASE_NAME = "case.json"
TEST_NAME = "test_repro.py"

_TEST = '''"""{paragraph}

Stand-alone: `python -m pytest {test}` (with the observatory installed; on a V1 release run it
as `PYTHONHASHSEED=0 python -m pytest {test}`). It fails while the `{detector}` detector still
fires on this workload, and passes on a release (or under a policy) that fixed it.
"""

from pathlib import Path

from engine.hunt.bundle import rerun

HERE = Path(__file__).resolve().parent


def test_{name}_does_not_fire():
    outcome = rerun(HERE)
    assert outcome.end != "refused", outcome.refused
    hit = outcome.fired("{detector}")
    assert hit is None, f"{{hit.detector}} at step {{hit.step}}: {{hit.what}}"
'''


def name_for(hit: Hit, case: Case) -> str:
    policy = re.sub(r"[^A-Za-z0-9.-]+", "_", case.policy)
    return f"{hit.detector}-{policy}-{case.index:05d}"


def paragraph(hit: Hit, case: Case, vllm: str, original: int, tries: int) -> str:
    s = case.settings
    engine = ", ".join(f"{k} {v}" for k, v in s.items() if k not in ("policy", "model"))
    spread = "all at once" if not any(r.timestamp for r in case.rows) else \
        f"over {max(r.timestamp for r in case.rows) / 1000:g} s"
    return (f"On vLLM {vllm} (the sim backend: vLLM's real scheduler and KV manager), "
            f"workload {case.index} of hunt seed {case.seed}, shrunk from {original} to "
            f"{len(case.rows)} requests in {tries} runs: the {hit.detector} detector fired at "
            f"step {hit.step}: {hit.what}. The workload: {len(case.rows)} requests of "
            f"{case.samples} sample(s), prompts of {min(r.input_length for r in case.rows)} "
            f"to {max(r.input_length for r in case.rows)} tokens, outputs of "
            f"{min(r.output_length for r in case.rows)} to "
            f"{max(r.output_length for r in case.rows)}, arriving {spread}; model "
            f"{s.get('model')}, policy {case.policy}; engine: {engine}.")


def write(directory: Path, case: Case, hit: Hit, vllm: str, original: int,
          tries: int) -> tuple[Path, Outcome]:
    """Write the bundle for `hit` (found in `case`, already shrunk) under `directory`; the
    bundle's path and the outcome of its recorded run."""
    path = directory / name_for(hit, case)
    path.mkdir(parents=True, exist_ok=True)
    outcome = run_case(case, path, record=True)
    shown = outcome.fired(hit.detector) or hit  # the recorded run's own step and words
    text = paragraph(shown, case, vllm, original, tries)
    (path / CASE_NAME).write_bytes(case_io.encode(case) + b"\n")
    (path / CONFIG_NAME).write_text(toml_out.dumps(case.config_fields()))
    (path / "README.md").write_text(f"# {hit.detector}: workload {case.index} of hunt seed "
                                    f"{case.seed} (vLLM {vllm})\n\n{text}\n")
    (path / TEST_NAME).write_text(_TEST.format(paragraph=text, test=TEST_NAME,
                                               detector=hit.detector,
                                               name=hit.detector.replace("-", "_")))
    return path, outcome


def rerun(path: Path) -> Outcome:
    """Run a bundle's case again on the installed release (what its test_repro.py does)."""
    case = case_io.decode((path / CASE_NAME).read_bytes())
    import tempfile

    with tempfile.TemporaryDirectory(prefix="observatory-repro-") as tmp:
        return run_case(case, Path(tmp))


def recording_of(path: Path) -> Path:
    return path / RECORDING_NAME
