"""Every supported vLLM release: the installed one is recognised and picks its adapter family,
the seed's bug reproduces under `off`, `strict` survives it on 0.5 only, and `reserve` on every
release, over docs/versions.md's range (CLAIM_STEPS).
CI runs the `every_vllm` tests in each release's own virtualenv (.ci/run)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from engine.adapters.versions import (SUPPORTED, installed_version, release_for,
                                      require_supported)
from engine.errors import EngineError
from engine.stream.records import EngineAborted, Header, RunFinished, StepRecord
from engine.session import Session
from engine.spec import preset_spec


def run(spec) -> list:
    items: list = []
    session = Session(spec.validated())
    session.subscribe(items.append)
    session.run()
    return items


@pytest.mark.every_vllm
def test_the_installed_vllm_is_supported_and_recorded():
    release = require_supported()
    import vllm

    assert release.version == vllm.__version__.split("+")[0]
    header = next(i for i in run(preset_spec("demo", max_steps=3)) if isinstance(i, Header))
    assert header.vllm_version == vllm.__version__
    assert header.spec["preemption_mode"] == "swap"
    assert header.engine_config["scheduler"]["preemption_mode"] == "swap"


def test_an_unsupported_version_names_the_nearest_release_and_its_command(monkeypatch):
    from engine.adapters import versions

    monkeypatch.setattr(versions, "installed_version", lambda: None)
    with pytest.raises(EngineError) as error:
        versions.require_supported()
    message = str(error.value)
    assert "\n" not in message and "no vLLM is installed" in message
    for release in SUPPORTED:
        assert release.version in message and release.install in message
    for found in ("0.4.3", "0.8.2", "0.17.1", "0.33.1", "0.99.0"):
        monkeypatch.setattr(versions, "installed_version", lambda: found)
        with pytest.raises(EngineError) as error:
            versions.require_supported()
        message = str(error.value)
        near = versions.nearest(found)
        assert "\n" not in message and f"vLLM {found} is not supported" in message
        assert f"nearest supported release is {near.version} ({near.install})" in message
        for release in SUPPORTED:
            assert release.version in message
    assert release_for("0.6.3.post1+cu121").extra == "vllm063"


def test_the_nearest_release_is_the_closest_by_version_number():
    from engine.adapters.versions import KNOWN, nearest

    assert nearest("0.4.3").version == KNOWN[0].version  # the oldest the table resolves
    assert nearest("0.33.1").version == "0.33.0"  # the same minor line before the next
    assert nearest("0.6.3.post2").version == "0.6.3.post1"
    assert nearest("0.99.0") == KNOWN[-1]


def test_versions_command_lists_the_releases():
    out = subprocess.run([sys.executable, "-m", "tui.cli", "versions"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"installed: vLLM {installed_version()}" in out.stdout
    mine = release_for(installed_version())
    assert f"adapter family {mine.family}" in out.stdout
    listing = out.stdout.split("\ninstall:\n", 1)[0]
    table = [line.replace("*", " ").split() for line in listing.splitlines()
             if line.startswith(" ")]
    rows = {cells[0]: cells[1:3] for cells in table}
    commands = re.sub(r" \\\n +", " ", out.stdout)  # a long command goes on after ` \`
    for release in SUPPORTED:
        assert release.install in commands
        assert rows[release.version] == [release.engine.upper(), release.family]


_seed_off: list = []


def seed_off() -> list:
    """seed-5578 under off, run once per test session (hundreds of steps)."""
    if not _seed_off:
        _seed_off.append(run(preset_spec("seed-5578", policy="off")))
    return _seed_off[0]


def fans_out() -> bool:
    return release_for(installed_version()).family == "v064_0102"


@pytest.mark.every_vllm
def test_seed_off_aborts_for_lack_of_swap_space():
    items = seed_off()
    abort = next(i for i in items if isinstance(i, EngineAborted))
    assert abort.message.startswith("Aborted due to the lack of CPU swap space")
    assert abort.cpu_used / abort.cpu_total > 0.95


CLAIM_STEPS = 3000
"""The range docs/versions.md's per-version claims name: a policy "survives" the seed when it runs
this many steps without an abort (bench/bench_policies.py measures the same)."""


def family_name() -> str:
    return release_for(installed_version()).family


def tokens_per_sim_s(records: list, until_s: float) -> float:
    """Generated tokens per simulated second over the steps that ended by `until_s`."""
    done = [r for r in records if r.sim_s <= until_s]
    return sum(r.generated_tokens for r in done) / done[-1].sim_s


@pytest.mark.every_vllm
def test_seed_strict_over_the_claimed_range():
    """docs/versions.md: `strict` survives the seed on 0.5.0.post1 only. From 0.6 the groups
    admitted before the first swap-out already outgrow GPU + CPU (the v2 block manager swaps a
    group's prompt once per sequence; from 0.6.4 a group is one sequence): it delays the
    abort."""
    strict = run(preset_spec("seed-5578", policy="strict", max_steps=CLAIM_STEPS))
    abort = next((i for i in strict if isinstance(i, EngineAborted)), None)
    records = [i for i in strict if isinstance(i, StepRecord)]
    if family_name() == "v050":
        assert abort is None
        end = strict[-1]
        assert isinstance(end, RunFinished) and (end.reason, end.steps) == ("max_steps",
                                                                            CLAIM_STEPS)
        assert any(r.withheld for r in records) and max(r.cpu_used for r in records) > 0
    else:
        assert abort is not None and abort.message.startswith("Aborted due to the lack of CPU")
        assert any(r.overcommitted for r in records)


@pytest.mark.every_vllm
def test_seed_reserve_never_aborts_and_keeps_most_of_offs_rate():
    """The acceptance of `reserve`: the seed for CLAIM_STEPS steps without an abort, requests
    finished, and at least 70% of `off`'s generated tokens per simulated second over the
    simulated time `off` lived."""
    reserve = run(preset_spec("seed-5578", policy="reserve", max_steps=CLAIM_STEPS))
    assert not any(isinstance(i, EngineAborted) for i in reserve)
    end = reserve[-1]
    assert isinstance(end, RunFinished) and (end.reason, end.steps) == ("max_steps", CLAIM_STEPS)
    records = [i for i in reserve if isinstance(i, StepRecord)]
    assert sum(len(r.finished) for r in records) > 0
    assert not any(r.overcommitted for r in records)
    assert all(r.gpu_used + r.cpu_used <= r.committed_blocks for r in records)
    off = [i for i in seed_off() if isinstance(i, StepRecord)]
    lifetime = off[-1].sim_s
    assert tokens_per_sim_s(records, lifetime) >= 0.7 * tokens_per_sim_s(off, lifetime)


@pytest.mark.every_vllm
def test_fan_out_reports_parent_requests_with_sequence_counts():
    """From 0.6.4 the records name the parent request of each fanned-out group, once, and
    count the sequences swapped; before, a group is a request and the counts are absent."""
    steps = [i for i in seed_off() if isinstance(i, StepRecord)]
    header = next(i for i in seed_off() if isinstance(i, Header))
    swapped = [r for r in steps if r.swapped_out]
    assert swapped
    for r in swapped:
        assert len(set(r.swapped_out)) == len(r.swapped_out)
        assert all("_parallel_sample_" not in rid for rid in r.swapped_out + r.finished)
        if fans_out():
            assert r.swapped_out_seqs >= len(r.swapped_out)
        else:
            assert r.swapped_out_seqs is None
    assert header.spec["n"] == 8


@pytest.mark.every_vllm
def test_verify_refuses_a_recording_from_another_release(tmp_path):
    """Each shipped seed-5578-off recording verifies only on its own release; on any other the
    refusal is one line naming the install command that would verify it."""
    from pathlib import Path

    installed = release_for(installed_version())
    shipped = {"vllm050": "seed-5578-off.jsonl.zst"}
    for release in SUPPORTED:
        shipped.setdefault(release.extra, f"seed-5578-off-{release.extra}.jsonl.zst")
    root = Path(__file__).resolve().parents[1] / "recordings"
    checked = 0
    for release in SUPPORTED:
        if release == installed or not (root / shipped[release.extra]).is_file():
            continue
        out = subprocess.run([sys.executable, "-m", "tui.cli", "verify",
                              str(root / shipped[release.extra])],
                             capture_output=True, text=True, timeout=120)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1, out.stderr
        assert lines[0].startswith("observatory: error: ") and release.install in lines[0]
        assert f"recorded with vLLM {release.version}" in lines[0]
        checked += 1
    assert checked >= 1


@pytest.mark.every_vllm
def test_the_shipped_recording_of_the_installed_release_verifies():
    from pathlib import Path

    from engine.analysis.verify import verify_file

    release = release_for(installed_version())
    name = ("seed-5578-off.jsonl.zst" if release.extra == "vllm050"
            else f"seed-5578-off-{release.extra}.jsonl.zst")
    path = Path(__file__).resolve().parents[1] / "recordings" / name
    result = verify_file(str(path))
    assert result.ok, result.message
    assert "abort at step" in result.message


def test_every_release_of_the_table_resolves_to_its_row_and_a_trial_to_the_named_one(
        monkeypatch):
    from engine.adapters.versions import KNOWN, TRY_FAMILY, TRY_RELEASE

    monkeypatch.delenv(TRY_RELEASE, raising=False)
    monkeypatch.delenv(TRY_FAMILY, raising=False)
    for row in KNOWN:
        assert release_for(row.version) is row
        assert release_for(f"{row.version}+cu129") is row
    assert release_for("0.17.1") is None
    monkeypatch.setenv(TRY_RELEASE, SUPPORTED[-1].version)
    assert release_for("0.17.1") is SUPPORTED[-1]  # bench/v1_releases.py trying a family
    assert release_for(SUPPORTED[0].version) is SUPPORTED[0]  # a listed release stays its own
    monkeypatch.setenv(TRY_RELEASE, "9.9.9")
    assert release_for("0.17.1") is None
    monkeypatch.setenv(TRY_FAMILY, "v019+plugin")  # a family module no row uses yet
    tried = release_for("0.35.0")
    assert (tried.family, tried.engine, tried.sim_plugin, tried.extra) == ("v019", "v1", True, "")
