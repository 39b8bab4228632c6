"""The gpu backend's path on every supported vLLM, driven on a CPU as far as it goes without
CUDA: the executor vLLM itself picks, the platform vLLM detects (never the sim's), and the
same scheduling arguments as the sim's, through `observatory run --dry-run` and through
vLLM's own `LLMEngine.from_engine_args` and engine construction.

Each check runs in a fresh process: vLLM resolves its platform once per process, and the sim
installs its own on 0.10 (engine.adapters.v0.sim_platform), so a gpu resolution must never
share a process with a sim engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.adapters.build_shared import SCHEDULING_ARGS, cuda_available

ROOT = Path(__file__).resolve().parents[1]
SIM_EXECUTOR = "engine.adapters.v0.sim_executor.SimExecutor"


def _python(code: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env)


def _dry_run(*flags: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "tui.cli", "run", "--dry-run", "--json",
                          *flags], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def dry_runs() -> dict[tuple[str, str], dict]:
    """(preset, backend) -> the dry run's JSON, each from its own `observatory run`."""
    return {(preset, backend): _dry_run("--preset", preset, "--backend", backend)
            for preset in ("seed-5578", "demo") for backend in ("gpu", "sim")}


@pytest.mark.every_vllm
def test_gpu_dry_run_names_a_real_executor_and_platform(dry_runs):
    from engine.adapters.versions import require_supported

    release = require_supported()
    gpu, sim = dry_runs["seed-5578", "gpu"], dry_runs["seed-5578", "sim"]
    assert gpu["vllm_version"].split("+")[0] == release.version
    assert gpu["api_family"] == release.family and gpu["engine"] == release.engine
    assert gpu["executor_class"].startswith("vllm.executor.")
    assert gpu["executor_class"] != SIM_EXECUTOR and sim["executor_class"] == SIM_EXECUTOR
    platform = gpu["platform_class"]
    if release.family == "v050":  # 0.5.0 has no vllm.platforms: its DeviceConfig says cuda
        assert platform is None
    else:
        assert platform.startswith("vllm.platforms.") and "Sim" not in platform
    assert gpu["device_type"] == "cuda"
    assert gpu["cuda_available"] is cuda_available()
    assert any("no CUDA device" in note for note in gpu["notes"]) is (not cuda_available())
    assert gpu["engine_args"]["enforce_eager"] is False  # CUDA graphs, as in production


@pytest.mark.every_vllm
@pytest.mark.parametrize("preset", ["seed-5578", "demo"])
def test_gpu_and_sim_resolve_the_same_scheduling_arguments(dry_runs, preset):
    gpu, sim = dry_runs[preset, "gpu"], dry_runs[preset, "sim"]
    assert {k: gpu["engine_args"][k] for k in SCHEDULING_ARGS} == \
        {k: sim["engine_args"][k] for k in SCHEDULING_ARGS}
    assert gpu["engine_args"]["async_output_proc"] is False  # a step's outputs in its record
    assert gpu["engine_args"]["preemption_mode"] == "swap"
    # the CPU blocks: the seed's 4 GiB gives 7281 blocks; the demo's 512 become a swap space
    # from which vLLM's GPU worker derives 512
    blocks = {"seed-5578": 7281, "demo": 512}[preset]
    assert gpu["engine_args"]["num_cpu_blocks"] == sim["engine_args"]["num_cpu_blocks"] == blocks
    assert gpu["engine_args"]["num_gpu_blocks_override"] == \
        sim["engine_args"]["num_gpu_blocks_override"]


@pytest.mark.every_vllm
def test_the_named_executor_is_the_one_vllm_itself_picks():
    """vLLM's own `LLMEngine.from_engine_args`, on the gpu backend's EngineArgs, with the
    engine's constructor replaced by one that keeps the executor class it was handed: that is
    the class vLLM picks. The dry run must name it, and it must import from its dotted path."""
    out = _python("""
        import importlib, json
        from engine.adapters.v0 import build
        from engine.adapters.versions import family
        from engine.spec import preset_spec

        spec = preset_spec("seed-5578", backend="gpu",
                           model=build.sim_model_dir("opt-125m")).validated()
        fam = family("gpu")
        resolved = build.resolve(spec)
        from vllm import LLMEngine

        class Probe(LLMEngine):
            def __init__(self, *args, executor_class, **kwargs):
                self.picked = executor_class

        picked = Probe.from_engine_args(build.engine_args(spec, fam)).picked
        module, _, name = resolved.executor_class.rpartition(".")
        named = getattr(importlib.import_module(module), name)
        import vllm.executor.executor_base as base
        print(json.dumps({"picked": f"{picked.__module__}.{picked.__qualname__}",
                          "same": named is picked, "executor_base": issubclass(named, base.ExecutorBase),
                          "named": resolved.executor_class, "platform": fam.platform_class()}))
    """)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["same"] and result["executor_base"], result
    assert result["picked"] == result["named"] != SIM_EXECUTOR
    assert "Sim" not in (result["platform"] or "")


@pytest.mark.every_vllm
@pytest.mark.skipif(cuda_available(), reason="has CUDA: tests/test_gpu_backend.py builds it")
def test_the_gpu_engine_builds_up_to_the_device(tmp_path):
    """The gpu build on a CPU: the config (the demo's num_cpu_blocks as a swap space), then
    vLLM's own `LLMEngine` with a real tokenizer and the executor vLLM picked, which is where
    the device is needed. The failure must come from inside that executor (its worker asking
    for CUDA, or from 0.7 on, the worker class that only a detected CUDA platform names),
    so everything before it was built."""
    out = _python(f"""
        import importlib.util, inspect, json, traceback
        import msgspec
        spec = importlib.util.spec_from_file_location("gpu_smoke", {str(ROOT / "bench" / "gpu_smoke.py")!r})
        smoke = importlib.util.module_from_spec(spec); spec.loader.exec_module(smoke)
        model = str(smoke.build_tiny_opt({str(tmp_path / "tiny")!r}))
        from engine.adapters.v0 import build
        from engine.adapters.versions import family
        from engine.spec import preset_spec
        run = msgspec.structs.replace(preset_spec("demo", backend="gpu", model=model,
                                                  tokenizer=model), prompt_len=None).validated()
        fam = family("gpu")
        config, translation = build.engine_config(run)
        executor = build.executor_class(run, config)
        from vllm import LLMEngine
        from vllm.usage.usage_lib import UsageContext
        try:
            fam.construct(LLMEngine, config, executor_class=executor, log_stats=True,
                          usage_context=UsageContext.ENGINE_CONTEXT)
            result = {{"built": True}}
        except Exception as exc:
            frames = [frame.filename for frame in traceback.extract_tb(exc.__traceback__)]
            result = {{"built": False, "error": f"{{type(exc).__name__}}: {{exc}}",
                      "frames": frames, "executor_file": inspect.getfile(executor)}}
        result["derived_cpu_blocks"] = translation["derived_cpu_blocks"]
        print(json.dumps(result))
    """)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["derived_cpu_blocks"] == 512
    assert result["built"] is False
    assert result["executor_file"] in result["frames"], result
