"""Assemble a StepRecord from what the scheduler hooks captured and what the step left behind.

Called once per step, right after `LLMEngine.step()` returns: the moment vLLM has just read its
own `Stats` (in `do_log_stats`), so queue sizes and block counts here equal vLLM's metrics. The
token counts follow how vLLM computes its own Stats: prompt tokens are the prefill chunks; generated
tokens are the decode sequences plus the first token of every prefill that completed.

Request ids are requests, not groups: from vLLM 0.6.4 an n>1 request runs as n single-sequence
groups, which the records fold into their parent so a step reads the same in every release
(`prefills` keeps one entry per scheduled group, each chunk's tokens as vLLM counted them).
"""

from __future__ import annotations

from typing import Any

from engine.adapters.v0 import hooks as vllm_hooks
from engine.costmodel import CostModel
from engine.policy import Demand
from engine.stream.records import StepRecord
from engine.adapters.v0.hooks import StepCapture


def build_step_record(step: int, capture: StepCapture, scheduler, cost: CostModel,
                      sim_start_s: float, wall_s: float, fans_out: bool = False,
                      demand: Demand | None = None) -> StepRecord:
    """`fans_out`: vLLM 0.6.4+ runs an n>1 request as n groups; ids are then the parent
    requests (repeats folded) and the swap counts in sequences are recorded too. `demand`:
    the committed demand measured after the step (SchedulerHook.demand)."""
    outputs = capture.outputs
    scheduled = outputs.scheduled_seq_groups if outputs is not None else []
    num_prefill = outputs.num_prefill_groups if outputs is not None else 0
    batched = outputs.num_batched_tokens if outputs is not None else 0

    rid = vllm_hooks.request_id
    prefills: list[tuple[str, int]] = []
    first_tokens: list[str] = []
    first_token_seqs = 0
    prompt_tokens = 0
    sampled_groups = []
    for scheduled_group in scheduled[:num_prefill]:
        group = scheduled_group.seq_group
        prefills.append((rid(group), scheduled_group.token_chunk_size))
        prompt_tokens += scheduled_group.token_chunk_size
        if not group.is_prefill():  # this chunk completed the prompt and sampled
            first_tokens.append(rid(group))
            first_token_seqs += group.num_seqs()
            sampled_groups.append(group)
    decode_seqs = batched - prompt_tokens
    ignored = (_unique(rid(g) for g in outputs.ignored_seq_groups)
               if outputs is not None else [])
    finished = _unique([*(rid(s.seq_group) for s in scheduled if s.seq_group.is_finished()),
                        *ignored])
    first_tokens = _unique(first_tokens)

    gpu_used, gpu_total, cpu_used, cpu_total = vllm_hooks.block_counts(scheduler)
    block_size = scheduler.cache_config.block_size
    swap_blocks = vllm_hooks.swap_block_count(outputs)
    sim_step_s = cost.step_seconds(prompt_tokens, decode_seqs, gpu_used * block_size,
                                   swap_blocks)
    return StepRecord(
        step=step,
        wall_s=wall_s,
        sim_s=sim_start_s + sim_step_s,
        sim_step_s=sim_step_s,
        policy=str(capture.policy),
        running=len(scheduler.running),
        swapped=len(scheduler.swapped),
        waiting=len(scheduler.waiting),
        running_seqs=vllm_hooks.running_seqs(scheduler),
        gpu_used=gpu_used,
        gpu_total=gpu_total,
        cpu_used=cpu_used,
        cpu_total=cpu_total,
        batched_tokens=batched,
        token_budget=vllm_hooks.token_budget(scheduler),
        prefills=prefills,
        decode_groups=len(scheduled) - num_prefill,
        decode_seqs=decode_seqs,
        swapped_out=capture.swapped_out,
        swapped_in=capture.swapped_in,
        recomputed=capture.recomputed,
        ignored=ignored,
        finished=finished,
        first_tokens=first_tokens,
        prompt_tokens=prompt_tokens,
        generated_tokens=decode_seqs + first_token_seqs,
        withheld=capture.withheld,
        held_back=capture.held_back,
        swapped_out_seqs=capture.swapped_out_seqs if fans_out else None,
        swapped_in_seqs=capture.swapped_in_seqs if fans_out else None,
        swap_blocks=swap_blocks,
        committed_blocks=demand.blocks if demand is not None else None,
        committed_slack=demand.slack() if demand is not None else None,
        seq_finished=seq_finishes(capture.finished_seqs, scheduled, sampled_groups),
    )


def seq_finishes(freed: list[tuple[int, int]], scheduled: list[Any],
                 sampled: list[Any]) -> list[tuple[str, int]] | None:
    """(request id, output tokens) of each sequence that finished this step (None: none):
    those vLLM freed (`freed`, seq ids, from the hook's free_seq), and the samples a prompt
    step made that ended at once (vLLM adds such a child to its group without ever giving it
    blocks, so it is never freed). Read only on steps where something finished."""
    first = [(group, seq) for group in sampled for seq in group.get_seqs()
             if seq.is_finished()] if sampled else []
    if not freed and not first:
        return None
    rid = vllm_hooks.request_id
    done: list[tuple[str, int]] = []
    seen: set[int] = set()
    if freed:
        lengths = dict(freed)
        for s in scheduled:  # the groups that own them (seqs_dict: 0.5.0 to 0.10.2)
            group = s.seq_group
            ids = lengths.keys() & group.seqs_dict.keys()
            if ids:  # a request's samples are alike: by length, whatever their seq ids
                done += [(rid(group), n) for n in sorted(lengths[i] for i in ids)]
                seen |= ids
    for group, seq in first:
        if seq.seq_id not in seen:
            done.append((rid(group), seq.get_output_len()))
    return done or None


def abort_state(scheduler: Any) -> dict[str, int]:
    """EngineAborted's queues and blocks, read when vLLM raised out of a step (the Session's
    driver and an attached tap both)."""
    running, swapped, waiting = vllm_hooks.abort_queue_sizes(scheduler)
    gpu_used, gpu_total, cpu_used, cpu_total = vllm_hooks.block_counts(scheduler)
    return {"running": running, "swapped": swapped, "waiting": waiting,
            "gpu_used": gpu_used, "gpu_total": gpu_total, "cpu_used": cpu_used,
            "cpu_total": cpu_total}


def _unique(ids) -> list[str]:
    return list(dict.fromkeys(ids))
