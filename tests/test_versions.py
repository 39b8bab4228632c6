"""Every supported vLLM release: the installed one is recognised and picks its adapter family,
the seed's bug reproduces under `off`, and `strict` survives past the step where `off` aborts.
CI runs the `every_vllm` tests in each release's own virtualenv (.ci/run)."""

from __future__ import annotations

import subprocess
import sys

import msgspec
import pytest

from engine.adapters.versions import SUPPORTED, installed_version, release_for, require_supported
from engine.errors import ConfigError
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


def test_an_unsupported_version_names_every_release_and_its_command(monkeypatch):
    from engine.adapters import versions

    for found in ("0.4.3", None):
        monkeypatch.setattr(versions, "installed_version", lambda: found)
        with pytest.raises(ConfigError) as error:
            versions.require_supported()
        message = str(error.value)
        assert "\n" not in message
        for release in SUPPORTED:
            assert release.version in message and release.install in message
    assert release_for("0.6.3.post1+cu121").extra == "vllm063"


def test_versions_command_lists_the_releases():
    out = subprocess.run([sys.executable, "-m", "tui.cli", "versions"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"installed: vLLM {installed_version()}" in out.stdout
    for release in SUPPORTED:
        assert release.install in out.stdout


@pytest.mark.every_vllm
def test_seed_off_aborts_and_strict_survives_past_that_step():
    off = run(preset_spec("seed-5578", policy="off"))
    abort = next(i for i in off if isinstance(i, EngineAborted))
    assert abort.message.startswith("Aborted due to the lack of CPU swap space")
    steps = abort.step + 100
    strict = run(preset_spec("seed-5578", policy="strict", max_steps=steps))
    assert not any(isinstance(i, EngineAborted) for i in strict)
    end = strict[-1]
    assert isinstance(end, RunFinished) and (end.reason, end.steps) == ("max_steps", steps)
    records = [i for i in strict if isinstance(i, StepRecord)]
    assert any(r.withheld for r in records) and max(r.cpu_used for r in records) > 0
