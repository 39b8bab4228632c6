"""Nothing of the observatory in a vLLM it does not watch: with the observatory installed beside
vLLM, a process the observatory did not start finds no plugin of its (vLLM lists every
`vllm.platform_plugins` entry point in every process that imports it: "Available plugins for
group vllm.platform_plugins: observatory_sim"), while a sim engine the observatory runs still
gets its platform (engine.adapters.v1.platform.PLUGIN_PATH, on the path of those processes
alone)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

from engine.adapters.versions import installed_version

ENTRY_POINTS = ("from importlib.metadata import entry_points; "
                "print(sorted(e.name for e in entry_points(group='vllm.platform_plugins')))")


def _plain_env() -> dict[str, str]:
    """A user's shell: none of the variables the observatory sets for its own processes."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VLLM_", "OBSERVATORY_")) and k != "PYTHONPATH"}
    return {**env, "VLLM_LOGGING_LEVEL": "DEBUG"}  # every line vLLM has about its plugins


def test_no_process_the_observatory_did_not_start_sees_its_plugin():
    out = subprocess.run([sys.executable, "-c", ENTRY_POINTS], capture_output=True, text=True,
                         env=_plain_env(), cwd=tempfile.gettempdir(), timeout=120)
    assert out.returncode == 0, out.stderr
    assert "observatory" not in out.stdout, out.stdout


def test_the_sim_platform_plugin_is_found_on_the_observatorys_path_alone():
    from engine.adapters.v1.platform import PLUGIN_NAME, PLUGIN_PATH, _with_plugin_path

    env = {**_plain_env(), "PYTHONPATH": _with_plugin_path(None)}
    out = subprocess.run([sys.executable, "-c", ENTRY_POINTS], capture_output=True, text=True,
                         env=env, cwd=tempfile.gettempdir(), timeout=120)
    assert out.returncode == 0, out.stderr
    assert PLUGIN_NAME in out.stdout, (PLUGIN_PATH, out.stdout)


@pytest.mark.skipif(installed_version() is None, reason="needs vLLM installed")
def test_import_vllm_prints_nothing_of_the_observatory():
    """`python -c "import vllm"` (and resolving its platform, as any engine does), with vLLM's
    logging at DEBUG: not one line names the observatory."""
    code = ("import vllm\n"
            "try:\n"
            "    from vllm.platforms import current_platform; current_platform.device_type\n"
            "except Exception as exc:\n"
            "    print('platform:', type(exc).__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=_plain_env(), cwd=tempfile.gettempdir(), timeout=600)
    both = out.stdout + out.stderr
    assert "observatory" not in both.lower(), both[-2000:]
    assert out.returncode == 0, both[-2000:]
