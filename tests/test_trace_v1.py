"""Mooncake's shared prefixes through vLLM V1's own prefix cache and CPU tier (vllm033 only;
PYTHONHASHSEED=0): the hash_ids of tests/fixtures/traces/mooncake.jsonl (4 prefixes of 2 trace
blocks, 40 requests) must turn into hits on the blocks they allow, and --trace-n N into N
requests of one prompt."""

from __future__ import annotations

from typing import Any

import pytest

from engine.analysis.summary import summarize
from engine.spec import RunSpec
from engine.stream.records import Arrivals
from trace_fixtures import FIXTURES, plain
from v1_required import needs_v1, require_hash_seed

require_hash_seed()
pytestmark = needs_v1

MOONCAKE = str(FIXTURES / "mooncake.jsonl")


def run(spec: RunSpec) -> list[Any]:
    from engine.session import Session

    items: list[Any] = []
    session = Session(spec)
    session.subscribe(items.append)
    session.run()
    return items


def test_the_prefix_cache_hits_what_the_hash_ids_allow():
    summary = summarize(run(RunSpec(trace=MOONCAKE, enable_prefix_caching=True)))
    assert summary.finished_requests == 40
    allowed = summary.trace.prefix_tokens_allowed
    assert allowed > 0 and summary.cached_tokens_per_request <= allowed
    # docs/guides/traces.md: the fixture's shared prefixes hit all that they allow
    assert summary.cached_tokens_per_request == allowed == 36_864
    assert summary.cached_prompt_pct == round(100.0 * allowed / summary.prompt_tokens, 2)
    # no preemption here: each request was admitted once, so the two counts are one
    assert summary.preemptions == 0
    assert summary.cached_tokens_per_admission == summary.cached_tokens_per_request
    prompts = sum(i for i, _ in plain("mooncake.jsonl"))
    assert summary.prompt_tokens == prompts  # the prompts' tokens; most came from the cache
    assert summary.prompt_tokens_computed + summary.cached_tokens_per_request == prompts
    assert summary.prompt_tokens_computed < prompts / 2


def test_without_prefix_caching_nothing_hits():
    summary = summarize(run(RunSpec(trace=MOONCAKE, trace_limit=8)))
    assert summary.cached_tokens_per_admission == summary.cached_tokens_per_request == 0
    assert summary.trace.prefix_tokens_allowed > 0


def test_trace_n_runs_n_requests_of_one_prompt():
    items = run(RunSpec(trace=MOONCAKE, trace_limit=6, trace_n=3, enable_prefix_caching=True))
    ids = [rid for a in items if isinstance(a, Arrivals) for rid in a.request_ids]
    assert ids == [f"{line}.{k}" for line in range(1, 7) for k in range(3)]
    summary = summarize(items)
    assert summary.finished_requests == 18
    expected = plain("mooncake.jsonl")[:6]
    assert summary.generated_tokens == 3 * sum(o for _, o in expected)
    assert summary.cached_tokens_per_request > summary.trace.prefix_tokens_allowed * 0.5


def test_the_cpu_tier_serves_prefixes_that_fell_out_of_gpu_kv():
    """200 GPU blocks hold three of the four 64-block prefixes with a request's own blocks,
    and the requests cycle through all four (at a quarter of the trace's speed, one at a time:
    no preemption): each prefix is evicted before its group comes back, and vLLM's CPU tier
    (its OffloadingConnector) serves it."""
    fields = dict(trace=MOONCAKE, enable_prefix_caching=True, num_gpu_blocks=200,
                  trace_speed=0.25)
    summary = summarize(run(RunSpec(kv_offloading_gib=0.17, **fields)))
    assert summary.finished_requests == 40 and summary.preemptions == 0
    assert summary.cpu_tier_hit_tokens > 0 and summary.cpu_tier_loads > 0
    without = summarize(run(RunSpec(**fields)))
    assert without.finished_requests == 40
    assert summary.cached_tokens_per_request > without.cached_tokens_per_request


def test_preempted_requests_do_not_hit_the_prefix_cache_twice_in_the_percentage():
    """Issue #37: a Mooncake trace with prefix caching whose requests are preempted and
    resumed found their prefix again at every admission, and `trace_prefix_hit_pct` counted
    each admission (589.68). Counted per request (first admission) the cached tokens stay
    within what the hash_ids allow (admitted in arrival order: no CPU tier here) and within
    the prompts, and the per-admission count, named apart, is larger."""
    summary = summarize(run(RunSpec(trace=MOONCAKE, enable_prefix_caching=True, trace_n=4,
                                    num_gpu_blocks=160, max_num_seqs=16)))
    assert summary.preemptions > 0  # the point: requests admitted more than once
    assert summary.cached_tokens_per_admission > summary.cached_tokens_per_request > 0
    assert summary.cached_tokens_per_request <= summary.trace.prefix_tokens_allowed
    assert 0.0 < summary.cached_prompt_pct <= 100.0
