"""The gpu backend: vLLM's own GPUExecutor with a real model. Skipped without CUDA."""

from __future__ import annotations

import pytest

from engine.adapters.build import cuda_available
from engine.stream.records import StepRecord
from engine.spec import preset_spec

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")]


def test_gpu_demo_runs_a_real_model():
    from conftest import run_items

    spec = preset_spec("demo", backend="gpu", policy="strict", max_steps=50)
    items = run_items(spec)
    steps = [i for i in items if isinstance(i, StepRecord)]
    assert len(steps) == 50
    assert sum(s.generated_tokens for s in steps) > 0


def test_gpu_seed_prompts_are_tokenized_by_vllm():
    from conftest import run_items

    items = run_items(preset_spec("seed-5578", backend="gpu", requests=16, max_steps=20))
    steps = [i for i in items if isinstance(i, StepRecord)]
    assert steps and sum(s.prompt_tokens for s in steps) > 16 * 200
