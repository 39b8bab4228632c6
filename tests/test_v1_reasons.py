"""Why the waiting wait (issue #28 item 1), on vLLM's real V1 engine with the sim executor.

- Every step's `waiting_by_reason` equals the SchedulerStats vLLM itself made that step (its
  `num_requests_waiting_by_reason`: `capacity` = num_waiting_reqs, `deferred` =
  num_skipped_waiting_reqs), captured here from the EngineCoreOutputs vLLM's engine core hands
  its LLMEngine; on 0.18, which has no such metric, the record says nothing.
- Each reason appears when its cause is set up: the seats (`max_num_seqs` 2 with blocks and
  tokens to spare), the token budget and KV blocks (#25538's `v1-thrash`: prompts larger than
  the budget, a cache for ~2.4 of them), the observatory's own policy (`whole-context`), and
  the head-of-line stall of tests/test_stall_surfaces.py, whose stall line names it.

Needs a V1 release and PYTHONHASHSEED=0 (`PYTHONHASHSEED=0 pytest tests/test_v1_reasons.py`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from v1_required import RELEASE, needs_v1, require_hash_seed

pytestmark = needs_v1
require_hash_seed()

from engine.analysis.reasons import reason_text  # noqa: E402
from engine.analysis.stall import StallWatch, stall_text  # noqa: E402
from engine.analysis.summary import summarize  # noqa: E402
from engine.session import Session  # noqa: E402
from engine.spec import preset_spec  # noqa: E402
from engine.stream.records import V1StepRecord  # noqa: E402

HAS_METRIC = RELEASE is not None and RELEASE.family != "v018"
"""vLLM has `num_requests_waiting_by_reason` from 0.29 on (0.18's stats have no deferred
count)."""

_runs: dict[tuple, tuple[list, list]] = {}
_items: dict[tuple, list] = {}


def run(preset: str, **over: Any) -> tuple[list[V1StepRecord], list[Any]]:
    """(the step records, vLLM's SchedulerStats of each engine step) of one sim run. The stats
    are what vLLM's engine core returned to its LLMEngine (`EngineCoreOutputs.
    scheduler_stats`), taken on the way by a wrapper on the engine's client instance."""
    key = (preset, repr(sorted(over.items())))
    if key not in _runs:
        items: list = []
        session = Session(preset_spec(preset, **over).validated())
        session.subscribe(items.append)
        session.prepare()
        client = session.driver.engine.engine_core
        stats: list = []
        get_output = client.get_output

        def taking_stats(*args: Any, **kwargs: Any) -> Any:
            outputs = get_output(*args, **kwargs)
            stats.append(outputs.scheduler_stats)
            return outputs

        client.get_output = taking_stats
        try:
            session.run()
        finally:
            vars(client).pop("get_output", None)
        _runs[key] = ([i for i in items if type(i) is V1StepRecord], stats)
        _items[key] = items
    return _runs[key]


def reasons_of(steps: list[V1StepRecord]) -> Counter:
    return Counter(s.head_reason for s in steps)


def test_the_counts_equal_vllms_own_stats_at_every_step():
    steps, stats = run("v1-thrash", max_steps=400)
    assert len(steps) == len(stats) == 400
    assert all(st is not None for st in stats), "the sim engine logs stats (disable_log_stats off)"
    if not HAS_METRIC:
        assert all(s.waiting_by_reason == {} for s in steps)
        return
    for s, st in zip(steps, stats):
        assert s.waiting_by_reason == {"capacity": st.num_waiting_reqs,
                                       "deferred": st.num_skipped_waiting_reqs}, s.step
        # and together they are every waiting request the record counts
        assert sum(s.waiting_by_reason.values()) == s.waiting, s.step
    assert any(s.waiting_by_reason["capacity"] for s in steps)


def test_the_token_budget_and_kv_blocks_on_thrash():
    """#25538's workload: prompts of 4k-8k tokens against a 512-token budget fill the budget
    with one prefill chunk, and a cache for ~2.4 prompts refuses the next chunk's blocks."""
    steps, _ = run("v1-thrash", max_steps=400)
    seen = reasons_of(steps)
    assert seen["token_budget"] and seen["kv_blocks"], seen
    for s in steps:
        if s.head_reason == "token_budget":
            assert s.head_need >= s.head_limit == s.token_budget == s.batched_tokens, s.step
        elif s.head_reason == "kv_blocks":
            assert 0 < s.head_need and s.head_limit < s.head_need, s.step  # needed > free
            assert s.head_limit <= s.gpu_total, s.step
        elif s.head_reason == "preempted":
            assert s.preempted, s.step  # vLLM admits no one on a step that preempted
    assert all(s.head_reason for s in steps if s.waiting), "every step with a waiting request"
    assert all(not s.head_reason for s in steps if not s.waiting)


def test_the_seats_when_max_num_seqs_is_reached():
    """Two seats, blocks and tokens to spare: once two requests run, the rest wait for a seat
    and vLLM's scan stops at its `max_num_seqs` check."""
    steps, _ = run("v1-thrash", max_num_seqs=2, num_gpu_blocks=8000,
                   max_num_batched_tokens=16384, requests=6, max_steps=200)
    seats = [s for s in steps if s.head_reason == "seats"]
    assert seats, reasons_of(steps)
    assert all(s.head_need == s.head_limit == 2 for s in seats)
    assert all(s.running <= 2 for s in seats)
    assert "seats (max_num_seqs 2 reached)" in reason_text(seats[0])


def test_the_observatorys_own_policy_is_its_reason():
    steps, _ = run("v1-thrash", policy="whole-context", max_steps=300)
    policy = [s for s in steps if s.head_reason == "policy"]
    assert policy and all(s.withheld for s in policy), reasons_of(steps)
    assert reason_text(policy[0]) == "the observatory's policy (whole-context)"


def test_the_head_of_line_stall_names_the_blocks_its_head_waits_for():
    """The stall of tests/test_stall_surfaces.py (vLLM 0.33's full-ISL check refuses request
    1's 837 blocks while request 2, which would fit, waits behind it): the watchdog's stall
    carries the reason the records give, and the summary's longest stall says it."""
    over = dict(requests=3, prompt_len=2000, prompt_len_max=14000, min_tokens=600,
                max_tokens=1000, num_gpu_blocks=1101, seed=167, scheduler_reserve_full_isl=True)
    steps, _ = run("v1-thrash", **over)
    watch = StallWatch()
    for s in steps:
        watch.add(s)
    longest = watch.longest
    assert longest is not None and longest.steps >= 100
    assert longest.reason.startswith("KV blocks (needs ")
    last = next(s for s in steps if s.step == longest.step)
    assert last.head_reason == "kv_blocks" and last.head_need > last.head_limit
    assert stall_text(longest, compact=False).endswith(
        f": head request waits for KV blocks (needs {last.head_need:,}, "
        f"{last.head_limit:,} free)")
    items = _items[("v1-thrash", repr(sorted(over.items())))]
    assert summarize(items).longest_stall_reason == longest.reason
