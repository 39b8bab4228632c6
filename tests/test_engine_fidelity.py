"""The observatory must not change what it observes, and must report what vLLM reports."""

from __future__ import annotations

import pytest
from vllm import SamplingParams

from engine.adapters.v0.build import build_engine
from engine.adapters.v0.hooks import scheduler_of
from engine.stream.records import Arrivals, EngineAborted, StepRecord
from engine.session import Session
from engine.spec import preset_spec
from engine.workload import Workload


def snapshot(scheduler) -> tuple:
    """Everything a scheduling decision changes, in a comparable form."""
    bm = scheduler.block_manager
    return (
        tuple(g.request_id for g in scheduler.running),
        tuple(g.request_id for g in scheduler.swapped),
        tuple(g.request_id for g in scheduler.waiting),
        bm.get_num_free_gpu_blocks(),
        bm.get_num_free_cpu_blocks(),
        sum(s.get_output_len() for g in scheduler.running for s in g.get_seqs()),
    )


def unobserved_run(spec, arrival_steps: dict[str, int]) -> tuple[list[tuple], str | None]:
    """The same engine and workload with nothing attached: the installed vLLM as released.

    Requests are handed over before the same steps as in the observed run (`arrival_steps`,
    from its Arrivals records): when requests arrive is input, not a decision.
    """
    built = build_engine(spec)
    engine = built.engine
    params = SamplingParams(n=spec.n, max_tokens=spec.max_tokens,
                            stop_token_ids=built.stop_token_ids)
    by_step: dict[int, list] = {}
    for request in Workload(spec, built.max_model_len).initial():
        by_step.setdefault(arrival_steps[request.request_id], []).append(request)
    snapshots, abort, last, step = [], None, -1.0, 0
    while True:
        for request in by_step.pop(step, ()):
            last = max(request.arrival_s, last + 1e-6)  # the session's arrival tie-break
            engine.add_request(request.request_id, {"prompt_token_ids": request.prompt_token_ids},
                               params, arrival_time=last)
        if not engine.has_unfinished_requests():
            break
        try:
            engine.step()
        except RuntimeError as exc:
            abort = str(exc)
            break
        snapshots.append(snapshot(built.scheduler))
        step += 1
    assert not by_step
    return snapshots, abort


def arrival_steps(items) -> dict[str, int]:
    return {rid: i.step for i in items if isinstance(i, Arrivals) for rid in i.request_ids}


def observed_run(spec) -> tuple[list[tuple], list]:
    session = Session(spec)
    session.prepare()
    snapshots: list[tuple] = []
    items: list = []

    def sink(item):
        items.append(item)
        if isinstance(item, StepRecord):
            snapshots.append(snapshot(scheduler_of(session.engine)))

    session.subscribe(sink)
    session.run()
    return snapshots, items


@pytest.mark.every_vllm
@pytest.mark.parametrize("overrides", [
    {},
    {"arrival_rate": 40.0, "seed": 7},
    {"arrival_rate": 1.5, "requests": 10, "max_tokens": 64},  # idle gaps between arrivals
])
def test_policy_off_decides_exactly_like_the_unobserved_engine(overrides):
    spec = preset_spec("demo", policy="off", **overrides).validated()
    observed, items = observed_run(spec)
    plain, plain_abort = unobserved_run(spec, arrival_steps(items))
    assert len(plain) > 100 and len({a.step for a in items if isinstance(a, Arrivals)}) >= 1
    assert observed == plain  # every step: queues, their order, free blocks, tokens
    aborts = [i for i in items if isinstance(i, EngineAborted)]
    assert (aborts[0].message if aborts else None) == plain_abort


def test_records_agree_with_vllms_own_stats():
    spec = preset_spec("demo", policy="watermark:0.5").validated()
    session = Session(spec)
    session.prepare()
    stats = []
    stat_logger = session.engine.stat_logger
    original_log = stat_logger.log

    def capture(s):
        stats.append(s)
        original_log(s)

    stat_logger.log = capture  # vLLM calls this once per step with its own Stats
    records: list[StepRecord] = []
    session.subscribe(lambda i: records.append(i) if isinstance(i, StepRecord) else None)
    session.run()
    assert len(records) == len(stats) > 500
    for record, vllm_stats in zip(records, stats):
        assert record.running == vllm_stats.num_running_sys
        assert record.swapped == vllm_stats.num_swapped_sys
        assert record.waiting == vllm_stats.num_waiting_sys
        assert record.gpu_used / record.gpu_total == pytest.approx(vllm_stats.gpu_cache_usage_sys)
        assert record.cpu_used / record.cpu_total == pytest.approx(vllm_stats.cpu_cache_usage_sys)
        assert record.prompt_tokens == vllm_stats.num_prompt_tokens_iter
        assert record.generated_tokens == vllm_stats.num_generation_tokens_iter
        assert len(record.swapped_out) + len(record.recomputed) == vllm_stats.num_preemption_iter
    assert any(r.swapped for r in records) and any(r.first_tokens for r in records)


def test_sim_block_arithmetic_is_vllms():
    """The seed's log: '# GPU blocks: 8192, # CPU blocks: 7281' for OPT-125m with 4 GiB swap."""
    built = build_engine(preset_spec("seed-5578").validated())
    config = built.engine.cache_config
    assert (config.num_gpu_blocks, config.num_cpu_blocks) == (8192, 7281)
    assert built.max_model_len == 2048


def test_sim_runs_are_deterministic(demo_run):
    a = [i for i in demo_run("strict", max_steps=300) if isinstance(i, StepRecord)]
    spec = preset_spec("demo", policy="strict", max_steps=300).validated()
    _, items = observed_run(spec)
    b = [i for i in items if isinstance(i, StepRecord)]
    measured = ("wall_s", "exec_s")  # real time: differs between any two runs
    strip = lambda r: {k: getattr(r, k)  # noqa: E731
                       for k in r.__struct_fields__ if k not in measured}
    assert [strip(r) for r in a] == [strip(r) for r in b]
