"""Each policy's rule, on hand-built states of a real vLLM 0.5 Scheduler, and as a pure function.

The scheduler states are made with vLLM's own public pieces (Sequence, SequenceGroup, the block
manager's allocate / swap_out); `Scheduler.schedule()` then runs vLLM's real chunked-prefill
code with the observatory's hook attached.
"""

from __future__ import annotations

import itertools

import pytest
from vllm.config import CacheConfig, SchedulerConfig
from vllm.core.scheduler import Scheduler
from vllm.sampling_params import SamplingParams
from vllm.sequence import Logprob, Sequence, SequenceGroup, SequenceStatus

from engine.adapters.v0 import hooks as vllm_hooks
from engine.errors import ConfigError
from engine.policy import Demand, Policy, PrefillGate, admissible, parse_policy, withholds_prefills

BLOCK = 4
_ids = itertools.count()


def make_scheduler(gpu_blocks: int = 8, cpu_blocks: int = 8,
                   preemption_mode: str | None = None) -> Scheduler:
    scheduler_config = SchedulerConfig(max_num_batched_tokens=64, max_num_seqs=16,
                                       max_model_len=64, enable_chunked_prefill=True,
                                       preemption_mode=preemption_mode)
    cache_config = CacheConfig(block_size=BLOCK, gpu_memory_utilization=1.0, swap_space=1,
                               cache_dtype="auto")
    cache_config.num_gpu_blocks = gpu_blocks
    cache_config.num_cpu_blocks = cpu_blocks
    return Scheduler(scheduler_config, cache_config, None)


def make_group(request_id: str, prompt_len: int, arrival: float,
               max_tokens: int = 32, n: int = 1) -> SequenceGroup:
    inputs = {"prompt_token_ids": list(range(prompt_len)), "prompt": None,
              "multi_modal_data": None}
    seq = Sequence(next(_ids), inputs, BLOCK)
    return SequenceGroup(request_id, [seq], arrival_time=arrival,
                         sampling_params=SamplingParams(n=n, max_tokens=max_tokens))


def put_running_in_decode(scheduler: Scheduler, group: SequenceGroup) -> None:
    """Prompt computed, one token generated: the group's next step is a decode."""
    scheduler.block_manager.allocate(group)
    for seq in group.get_seqs():
        seq.status = SequenceStatus.RUNNING
        seq.data.update_num_computed_tokens(seq.get_len())
        seq.append_token_id(7, {7: Logprob(0.0)})
    scheduler.running.append(group)


def put_swapped(scheduler: Scheduler, group: SequenceGroup) -> None:
    put_running_in_decode(scheduler, group)
    scheduler.running.remove(group)
    scheduler.block_manager.swap_out(group)
    for seq in group.get_seqs():
        seq.status = SequenceStatus.SWAPPED
    scheduler.swapped.append(group)


def starved_state() -> Scheduler:
    """The seed's situation in miniature, with 8 GPU and 8 CPU blocks of 4 tokens:

    - A: running decode, 13 tokens in 3 blocks, needs a 4th block this step;
    - S: swapped out, a 20-token prompt in 5 CPU blocks (62.5% of the CPU cache) plus one
      generated token; swapping it back needs 6 free GPU blocks (vLLM reserves one per sequence),
      and only 4 are left after A's append, so it stays swapped;
    - W: waiting, a 4-token prompt that fits in the free GPU blocks.
    """
    scheduler = make_scheduler()
    put_running_in_decode(scheduler, make_group("A", 12, arrival=0.0))
    put_swapped(scheduler, make_group("S", 20, arrival=1.0))
    scheduler.add_seq_group(make_group("W", 4, arrival=2.0))
    return scheduler


def scheduled_prefills(scheduler: Scheduler, policy: str) -> tuple[list[str], vllm_hooks.StepCapture]:
    hook = vllm_hooks.attach(scheduler, policy)
    _, outputs = scheduler.schedule()
    prefills = [s.seq_group.request_id
                for s in outputs.scheduled_seq_groups[:outputs.num_prefill_groups]]
    return prefills, hook.current


def test_state_is_as_described():
    scheduler = starved_state()
    _, capture = scheduled_prefills(scheduler, "off")
    assert capture.swapped_in == [] and capture.still_swapped == 1
    assert [g.request_id for g in scheduler.swapped] == ["S"]
    assert vllm_hooks.cpu_usage(scheduler) == pytest.approx(5 / 8)


@pytest.mark.parametrize("policy, admitted", [
    ("off", True),  # vLLM 0.5.0.post1: the new prefill goes in although S is swapped (#5578)
    ("strict", False),  # PR #13539: nothing new while anything is swapped
    ("watermark:0.5", False),  # CPU cache 62.5% >= 50%
    ("watermark:0.9", True),  # 62.5% < 90%
])
def test_policies_on_a_starved_scheduler(policy, admitted):
    prefills, capture = scheduled_prefills(starved_state(), policy)
    assert ("W" in prefills) is admitted
    assert capture.withheld is (not admitted)
    assert capture.held_back == (0 if admitted else 1)


@pytest.mark.parametrize("policy", ["off", "strict", "watermark:0.5"])
def test_no_policy_withholds_when_nothing_is_swapped(policy):
    scheduler = make_scheduler()
    put_running_in_decode(scheduler, make_group("A", 12, arrival=0.0))
    scheduler.add_seq_group(make_group("W", 4, arrival=2.0))
    prefills, capture = scheduled_prefills(scheduler, policy)
    assert prefills == ["W"] and not capture.withheld


def test_policy_change_applies_at_the_next_schedule_call():
    scheduler = starved_state()
    hook = vllm_hooks.attach(scheduler, "off")
    hook.set_policy("strict", source="test")
    assert hook.policy == Policy("off")  # not yet: no step boundary has passed
    _, outputs = scheduler.schedule()
    assert hook.policy == Policy("strict") and hook.current.withheld
    assert [(step, str(old), str(new), src) for step, old, new, src in hook.changes] == [
        (0, "off", "strict", "test")]


def test_detach_restores_the_scheduler():
    scheduler = starved_state()
    hook = vllm_hooks.attach(scheduler, "strict")
    hook.detach()
    assert "schedule" not in vars(scheduler)
    _, outputs = scheduler.schedule()
    assert "W" in [s.seq_group.request_id
                   for s in outputs.scheduled_seq_groups[:outputs.num_prefill_groups]]


def test_attaching_twice_is_refused():
    scheduler = make_scheduler()
    vllm_hooks.attach(scheduler)
    with pytest.raises(RuntimeError, match="already"):
        vllm_hooks.attach(scheduler)


# --------------------------------------------------------------------- reserve on a scheduler
def test_reserve_lets_vllm_admit_only_what_fits_at_worst():
    """16 + 16 blocks of 4 tokens; 8 waiting requests of a 4-token prompt, n=2, max_tokens 12:
    at worst each holds its prompt block once (v1 block manager) and 3 more per sequence, 7
    blocks, and a victim needs 7 + 2 of slack. The third takes the demand to 21; a fourth
    would need 21 + 7 + 9 = 37 > 32. `off` lets vLLM admit all eight."""
    def state(n: int = 2) -> Scheduler:
        scheduler = make_scheduler(gpu_blocks=16, cpu_blocks=16)
        for i in range(8):
            scheduler.add_seq_group(make_group(f"W{i}", 4, arrival=float(i), max_tokens=12,
                                               n=n))
        return scheduler

    prefills, capture = scheduled_prefills(state(), "off")
    assert prefills == [f"W{i}" for i in range(8)]
    scheduler = state()
    prefills, capture = scheduled_prefills(scheduler, "reserve")
    assert prefills == ["W0", "W1", "W2"]
    assert capture.withheld and capture.held_back == 5
    assert [g.request_id for g in scheduler.waiting] == [f"W{i}" for i in range(3, 8)]
    hook = vllm_hooks.SchedulerHook(scheduler, Policy("off"))  # reads, attaches nothing
    demand = hook.demand()
    assert (demand.blocks, demand.capacity, demand.largest_group, demand.most_seqs) == (
        21, 32, 7, 2)
    assert demand.guaranteed and not demand.recomputable
    # one-sequence groups: any victim the CPU cannot hold is recomputed, so none is refused
    prefills, capture = scheduled_prefills(state(n=1), "reserve")
    assert prefills == [f"W{i}" for i in range(8)] and not capture.withheld


def test_reserve_recomputes_a_single_sequence_victim_the_cpu_cannot_hold():
    """A and B each hold 4 full GPU blocks (8 of 8); A needs a fifth, so vLLM preempts B, and
    with preemption_mode="swap" B's 4 blocks must go to a CPU with 2. Under `off` that is the
    seed's abort; under `reserve` B is recomputed (vLLM's own `_preempt_by_recompute`)."""
    def state() -> Scheduler:
        scheduler = make_scheduler(gpu_blocks=8, cpu_blocks=2, preemption_mode="swap")
        for name in ("A", "B"):
            group = make_group(name, 15, arrival=float(ord(name)))
            put_running_in_decode(scheduler, group)  # 16 tokens: 4 full blocks
        return scheduler

    with pytest.raises(RuntimeError, match="lack of CPU swap space"):
        scheduled_prefills(state(), "off")
    scheduler = state()
    prefills, capture = scheduled_prefills(scheduler, "reserve")
    assert capture.recomputed == ["B"] and capture.swapped_out == []
    assert capture.recomputed_not_swapped == 1
    assert [g.request_id for g in scheduler.running] == ["A"]
    assert [g.request_id for g in scheduler.waiting] == ["B"]
    assert scheduler.block_manager.get_num_free_cpu_blocks() == 2


# --------------------------------------------------------------------- the pure rule
@pytest.mark.parametrize("gate, strict, wm50", [
    (PrefillGate(0, 0, 0.0), False, False),
    (PrefillGate(1, 0, 0.0), True, False),  # preempted this step
    (PrefillGate(0, 3, 0.2), True, False),  # still swapped after swap-in
    (PrefillGate(0, 0, 0.5), False, True),  # exactly at the watermark withholds
    (PrefillGate(0, 2, 0.49), True, False),
])
def test_rule(gate, strict, wm50):
    assert withholds_prefills(Policy("off"), gate) is False
    assert withholds_prefills(Policy("strict"), gate) is strict
    assert withholds_prefills(Policy("watermark", 0.5), gate) is wm50


def test_parse():
    assert parse_policy("watermark") == Policy("watermark", 0.5)
    assert str(parse_policy("WATERMARK:0.25")) == "watermark:0.25"
    assert parse_policy(" Reserve ") == Policy("reserve")
    for bad in ("fast", "watermark:0", "watermark:1.5", "watermark:x", "strict:0.5", "",
                "reserve:x", "reserve:0.5", "reserve:"):
        with pytest.raises(ConfigError) as error:
            parse_policy(bad)
        assert "\n" not in str(error.value)


# --------------------------------------------------------------------- reserve's rule
def test_reserve_admits_in_order_while_demand_plus_one_victim_fits():
    # capacity 1000; each group needs 100 blocks at worst and runs 8 sequences
    demand = Demand(blocks=500, capacity=1000, largest_group=100, most_seqs=8)
    # 500 + 100 + (100 + 8) = 708 fits; 800 + 108 = 908 fits; 900 + 108 = 1008 does not
    assert admissible(demand, [(100, 8)] * 5) == 3
    # FCFS: a small group behind one that does not fit is not let past it
    assert admissible(demand, [(100, 8), (100, 8), (100, 8), (400, 8), (1, 1)]) == 3
    # a group preempted by recompute (0, 0) is counted already: it always comes back
    full = Demand(blocks=990, capacity=1000, largest_group=100, most_seqs=8)
    assert admissible(full, [(0, 0), (0, 0), (100, 8)]) == 2
    # a larger newcomer raises the slack it needs
    assert admissible(Demand(blocks=0, capacity=1000), [(400, 8), (400, 8)]) == 1
    # nothing admitted: the first group is let in even when it alone is too large
    assert admissible(Demand(blocks=0, capacity=100), [(300, 8), (1, 1)]) == 1


def test_reserve_guarantee_and_too_late():
    assert Demand(blocks=892, capacity=1000, largest_group=100, most_seqs=8).guaranteed
    late = Demand(blocks=893, capacity=1000, largest_group=100, most_seqs=8)
    assert not late.guaranteed and late.slack() == 108
    assert admissible(late, [(10, 1)]) == 0
    # every victim has one sequence and can be recomputed instead: nothing can abort
    assert Demand(blocks=5000, capacity=1000, recomputable=True).guaranteed

