"""The release table (engine/adapters/releases.json): every vLLM release from 0.5.0 to 0.34.0
resolves to a family the code has, with the date and figures of the bench run that earned it,
or is refused in one line that says what is missing; the rows the code builds (versions.py),
`observatory versions` and `--releases` all read it. No vLLM needed: runs in every venv."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from engine.adapters import release_table
from engine.adapters.versions import KNOWN, REFUSED, SUPPORTED, release_for, unsupported_line
from engine.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]

V1_RANGE = ("0.18.0", "0.18.1", "0.19.0", "0.19.1", "0.20.0", "0.20.1", "0.20.2", "0.21.0",
            "0.22.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0",
            "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")
"""The issue's 24 V1 releases (PyPI's list, 0.18.0 to 0.34.0)."""
V0_RANGE = ("0.5.0", "0.5.0.post1", "0.5.1", "0.5.2", "0.5.3", "0.5.3.post1", "0.5.4", "0.5.5",
            "0.6.0", "0.6.1", "0.6.1.post1", "0.6.1.post2", "0.6.2", "0.6.3", "0.6.3.post1",
            "0.6.4", "0.6.4.post1", "0.6.5", "0.6.6", "0.6.6.post1", "0.7.0", "0.7.1", "0.7.2",
            "0.7.3", "0.8.0", "0.8.1", "0.8.2", "0.8.3", "0.8.4", "0.8.5", "0.8.5.post1",
            "0.9.0", "0.9.0.1", "0.9.1", "0.9.2", "0.10.0", "0.10.1", "0.10.1.1", "0.10.2")
"""Every release of vLLM's V0 engine on PyPI, 0.5.0 to 0.10.2."""
PINNED_THIS_YEAR = ("0.24.0", "0.27.1", "0.29.0")
"""verl 0.9.1 (0.24.0), vllm-metal (0.27.1), NeMo-RL and verl's main (0.29.0)."""


def test_every_release_from_0_5_to_0_34_resolves_or_says_what_is_missing():
    rows = {row.version: row for row in release_table.load()}
    for version in V1_RANGE + V0_RANGE:
        assert version in rows, f"the release table has no row for vLLM {version}"
        row = rows[version]
        assert row.engine == ("v1" if version in V1_RANGE else "v0"), version
        if row.family:
            assert (ROOT / "engine" / "adapters" / row.engine / f"family_{row.family}.py").is_file()
            assert row.earned or row.extra, f"{version}: resolves, but nothing earned it"
            if row.earned:
                assert row.bench is not None and row.bench.verify == "ok", version
                _assert_the_bug_and_its_fix_were_seen(version, row.bench)
        else:
            assert "\n" not in row.refused and len(row.refused) > 20, version
            assert "not benched" not in row.refused, version
    for version in PINNED_THIS_YEAR:
        assert release_for(version) is not None, f"{version} must resolve"


def _assert_the_bug_and_its_fix_were_seen(version: str, bench: release_table.Bench) -> None:
    """A bench that earned a family saw the preset's bug under `off` and not under the fix: a
    family that runs a release to the end but cannot switch one of vLLM's own rules off (0.18's
    on 0.19.0, which does not know `scheduler_reserve_full_isl`) runs `off` as the fix."""
    if bench.preset == "v1-thrash":
        assert bench.off_max_preemptions > bench.fix_max_preemptions, version
    else:
        assert bench.off_abort_step is not None and bench.fix_steps is not None, version
        assert bench.fix_steps > bench.off_abort_step, version


def test_the_table_file_is_sorted_one_row_a_line_and_round_trips(tmp_path):
    text = release_table.PATH.read_text()
    copy = tmp_path / "releases.json"
    release_table.save(release_table.load(), copy)
    assert copy.read_text() == text, "releases.json is not as release_table.save writes it"
    versions = [row.version for row in release_table.load()]
    assert versions == sorted(versions, key=lambda v: (release_table.numbers(v) + (0,) * 4)[:4])


def test_a_broken_row_is_refused_in_one_line_naming_it(tmp_path):
    bad = tmp_path / "releases.json"
    bad.write_text('{"releases": [{"version": "0.24.0", "engine": "v1", "famly": "v024"}]}')
    with pytest.raises(SystemExit) as exc:
        release_table.load(bad)
    assert "release 0.24.0: unknown field 'famly'" in str(exc.value)
    bad.write_text('{"releases": [{"version": "0.24.0", "engine": "v1"}]}')
    with pytest.raises(SystemExit, match="needs a family or a refusal"):
        release_table.load(bad)


def test_each_ci_line_is_a_pyproject_extra_that_pins_its_release():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for release in SUPPORTED:
        assert f"vllm=={release.version}" in extras[release.extra], release.extra
    assert "vllm0240" in {r.extra for r in SUPPORTED}


def test_a_refused_release_is_named_with_its_reason_and_the_nearest_supported():
    version = next(iter(REFUSED), None)
    if version is None:
        pytest.skip("the table refuses no release")
    line = unsupported_line(version)
    assert "\n" not in line and REFUSED[version] in line and "nearest supported" in line


def test_versions_command_prints_every_row_of_the_table():
    no_terminal = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    out = subprocess.run([sys.executable, "-m", "engine.cli", "versions"], capture_output=True,
                         text=True, timeout=120, cwd=ROOT, env=no_terminal)
    assert out.returncode == 0, out.stderr
    assert max(len(line) for line in out.stdout.splitlines()) <= 80  # no terminal: 80 columns
    commands = re.sub(r" \\\n +", " ", out.stdout)  # a long command goes on after ` \`
    for release in KNOWN:
        assert f" {release.version} " in out.stdout and release.install in commands
    refused = out.stdout.split("\nrefused (", 1)[1]
    for version, why in REFUSED.items():
        assert re.search(rf"(?<![\w.]){re.escape(version)}(?![\w.])", refused), version
    for version, why in list(REFUSED.items())[-1:]:  # one whole, as `versions RELEASE` says it
        one = subprocess.run([sys.executable, "-m", "engine.cli", "versions", version],
                             capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert one.returncode == 0 and " ".join(why.split()) in " ".join(one.stdout.split())


def test_versions_of_one_release_says_its_figures_and_refuses_an_unknown_one():
    earned = next(r for r in KNOWN if r.earned)
    out = subprocess.run([sys.executable, "-m", "engine.cli", "versions", earned.version],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert f"family   {earned.family}" in out.stdout and f"earned   {earned.earned}" in out.stdout
    assert earned.install in re.sub(r" \\\n +", " ", out.stdout)
    bad = subprocess.run([sys.executable, "-m", "engine.cli", "versions", "0.99.0"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.count("\n") == 1 and f"nearest release it knows is {KNOWN[-1].version}" \
        in bad.stderr


def test_releases_lists_and_ranges_read_the_table():
    from engine.releases.select import select

    chosen = select("0.29.0, 0.24.0,0.29.0")
    assert [r.version for r in chosen.releases] == ["0.24.0", "0.29.0"]
    spanned = select("0.18.0..0.34.0")
    versions = [r.version for r in spanned.releases]
    assert versions[0] == "0.18.0" and versions[-1] == "0.34.0"
    assert set(versions) == {r.version for r in KNOWN if r.engine == "v1"}
    assert {v for v, _ in spanned.left_out} == {v for v in REFUSED if v in V1_RANGE}
    for bad, words in (("0.99.0", "not in the release table"), ("0.34.0..0.18.0", "ends before"),
                       ("..0.2", "LOW..HIGH"), ("", "at least one"),
                       ("0.1.0..0.2.0", "no release the table resolves")):
        with pytest.raises(ConfigError, match=words):
            select(bad)
    if REFUSED:
        version, why = next(iter(REFUSED.items()))
        with pytest.raises(ConfigError) as exc:
            select(version)
        assert why in str(exc.value)
