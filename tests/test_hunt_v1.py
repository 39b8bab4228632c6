"""`observatory hunt` on vLLM's V1 engine (issue #40): a reused engine (reset by vLLM's own
APIs between workloads) records what a new one records; an engine with the CPU tier is never
reused (vLLM's offloading connector keeps per-request state no reset clears); and the
detectors fire on the real V1 scheduler for #25538's thrash; and the offload deadlock the hunt
found holds where it was found and not where vLLM fixed it. CI: every V1 line (V1_TESTS in
.ci/run: 0.18, 0.24, 0.29, 0.33, 0.34).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from test_hunt import assert_reuse_is_invisible
from v1_required import V1_INSTALLED, NEEDS_V1, cpu_tier_refusal, require_hash_seed

pytestmark = pytest.mark.skipif(not V1_INSTALLED, reason=NEEDS_V1)
if V1_INSTALLED:
    require_hash_seed()


def test_a_reused_v1_engine_makes_the_records_a_new_one_makes(tmp_path):
    """Seed 1's first engine batch (prefix caching on, llama-16k, 16 seats): four workloads
    on one engine, reset between them, each as on an engine of its own."""
    assert_reuse_is_invisible(seed=1, workloads=4, tmp=tmp_path)


@pytest.mark.skipif(V1_INSTALLED and cpu_tier_refusal() is not None,
                    reason="this release refuses the CPU tier")
def test_an_engine_with_the_cpu_tier_is_built_anew_each_time():
    from engine.hunt.case import Case, Row
    from engine.hunt.runner import run_case
    from engine.hunt.warm import WarmEngines

    settings = {"model": "opt-125m", "block_size": 16, "num_gpu_blocks": 200,
                "max_num_seqs": 8, "max_num_batched_tokens": 2048, "preemption_mode": "recompute",
                "enable_prefix_caching": True, "kv_offloading_gib": 0.05, "policy": "off",
                "trace_n": 1}
    case = Case(seed=0, index=0, settings=settings,
                rows=[Row(0, 700, 4, [1, 2]), Row(0, 700, 4, [1, 3])])
    engines = WarmEngines()
    first, second = run_case(case, engines=engines), run_case(case, engines=engines)
    assert first.end == second.end == "completed" and not first.hits and not second.hits
    assert (engines.built, engines.reused) == (2, 0)


def test_thrash_fires_on_25538s_shape():
    """Prompts of 4k-8k tokens, a budget smaller than a prompt and the full-ISL rule off (the
    shape #25538 reports, written here by hand: the hunt draws its own): a request is
    preempted THRASH_PREEMPTIONS times under off, and the detector names it."""
    from engine.hunt.case import Case, Row
    from engine.hunt.detectors import THRASH_PREEMPTIONS
    from engine.hunt.runner import run_case

    settings = {"model": "llama-16k", "block_size": 16, "num_gpu_blocks": 1200,
                "max_num_seqs": 256, "max_num_batched_tokens": 512,
                "preemption_mode": "recompute", "enable_prefix_caching": False,
                "scheduler_reserve_full_isl": False, "policy": "off", "trace_n": 1}
    rows = [Row(0, 4096 + 512 * (i % 8), 512, [i]) for i in range(12)]
    outcome = run_case(Case(seed=0, index=0, settings=settings, rows=rows))
    hit = outcome.fired("thrash")
    assert hit is not None and hit.state == "recompute", outcome
    assert f"for the {THRASH_PREEMPTIONS}th time" in hit.what


@pytest.mark.skipif(V1_INSTALLED and cpu_tier_refusal() is not None,
                    reason="this release refuses the CPU tier")
def test_the_offload_deadlock_the_hunt_found_holds_until_0_33():
    """`hunt --seed 11` found it on 0.24.0 and 0.29.0 (workload 415, shrunk 24 -> 9 requests;
    docs/guides/hunt.md): with the CPU tier and full-ISL on, requests admitted to load their
    prefix from the tier park holding 72 of 135 blocks; the head needs 42 with 3 free, the scan
    stops at it, the parked loads are never promoted, and nothing runs (#45406's shape). The
    no-progress guard ends the run. 0.33.0, whose waiting scan was rewritten, runs it through."""
    from engine.adapters.versions import installed_version
    from engine.hunt.case import decode
    from engine.hunt.runner import run_case

    case = decode((Path(__file__).parent / "fixtures/hunt/offload-deadlock-s11-w415.json")
                  .read_bytes())
    outcome = run_case(case)
    release = tuple(int(p) for p in installed_version().split(".")[:2])
    if release < (0, 33):
        hit = outcome.fired("livelock")
        assert hit is not None and outcome.end == "no_progress", outcome
        assert "0 running" in hit.what and "7 requests waited" in hit.what
    else:
        assert outcome.end == "completed" and not outcome.hits, outcome
