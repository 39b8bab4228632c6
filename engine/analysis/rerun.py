"""Any recording is a workload: how to re-run one on the sim, step for step.

Two ways, by what made the recording:

- **its own spec**: a run of the observatory on the sim (`run`, `live`, `serve`) is a pure
  function of its RunSpec, so the header's spec rebuilds it exactly, with the recorded policy
  changes as toggles and the recorded bursts issued again before their steps (`bursts`).
- **its requests**: a program's own engine (`exec`, `engine.attach`, `--scheduler-cls`, `vllm
  serve` watched), a run on the gpu backend, or a sim run with bursts. The spec is the sim with
  the engine the header's `engine_config` describes (vLLM's own settings: blocks, budget,
  seats, prefix caching...; `engine_spec`), and the workload is the recording itself read as a
  trace (engine.traces.recording): each request added before the step it arrived before, with
  its samples, output limit, prompt fingerprint and recorded output lengths.

`rerun_plan` picks the way; `workload_from_recording(path)` is the RunSpec alone (for
`releases --from`, which runs it on other releases). Pure: nothing here imports vLLM.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from engine.errors import ConfigError
from engine.kinds import kind_of
from engine.spec import RunSpec
from engine.traces.recording import (block_size_of, is_own_sim_run,  # noqa: F401 (its home)
                                     lacks, load_recording)

ENGINE_FIELDS = ("model", "num_gpu_blocks", "num_cpu_blocks", "swap_space_gib", "block_size",
                 "max_num_batched_tokens", "max_num_seqs", "enable_chunked_prefill",
                 "preemption_mode", "enable_prefix_caching", "scheduler_reserve_full_isl",
                 "long_prefill_token_threshold", "async_scheduling", "kv_offloading_gib",
                 "offload_eviction", "offload_bandwidth_gbps", "max_model_len", "seed", "cost")
"""The RunSpec fields that describe the engine and the sim, not the workload."""

MODELS_DIR = Path(__file__).resolve().parents[1] / "adapters" / "models"


@dataclass
class RerunPlan:
    """How to re-run a recording: the spec, and the bursts to issue before their steps."""

    spec: RunSpec
    bursts: dict[int, list[int]] = field(default_factory=dict)  # step -> sizes
    by_requests: bool = False  # the workload is the recording's requests (not its spec)


def bursts_of(recording: Any) -> dict[int, list[int]]:
    bursts: dict[int, list[int]] = {}
    for arrivals in recording.arrivals:
        if arrivals.source == "burst":
            bursts.setdefault(arrivals.step, []).append(len(arrivals.request_ids))
    return bursts


def _part(header: Any, name: str) -> dict[str, Any]:
    part = (header.engine_config or {}).get(name)
    return part if isinstance(part, dict) else {}


MIN_VOCAB = 50_003
"""A re-run's prompts are token ids below this (engine.traces.prompts): a model with a smaller
vocabulary (a tiny test model) would refuse them."""


def sim_model(name: str | None, max_model_len: int | None) -> str:
    """A model the sim can build for a recorded model `name`: the directory itself if this
    machine has it (its config.json) and its vocabulary holds a re-run's token ids, a packaged
    config of the same name, or the packaged one with the smallest context that holds
    `max_model_len`. The sim reads only the model's shape, and with the recorded block count
    that decides nothing but the bytes of a block, which only a CPU tier counts."""
    if name:
        path = Path(name).expanduser()
        if (path / "config.json").is_file() and _config(path / "config.json")[1] >= MIN_VOCAB:
            return str(path)
        base = name.rstrip("/").rsplit("/", 1)[-1]
        if (MODELS_DIR / base / "config.json").is_file():
            return base
    contexts = sorted((_config(p)[0], p.parent.name) for p in MODELS_DIR.glob("*/config.json"))
    for context, packaged in contexts:
        if max_model_len is None or context >= max_model_len:
            return packaged
    return contexts[-1][1]


def _config(config: Path) -> tuple[int, int]:
    """(context, vocabulary) of a config.json."""
    try:
        data = msgspec.json.decode(config.read_bytes())
    except (OSError, msgspec.DecodeError):
        return 0, 0
    if not isinstance(data, dict):
        return 0, 0
    return (int(data.get("max_position_embeddings") or 2048),
            int(data.get("vocab_size") or 0))


def engine_spec(header: Any) -> dict[str, Any]:
    """The engine fields of a re-run's RunSpec for a recording whose engine the observatory
    did not configure: read from vLLM's own config in the header (`engine_config`)."""
    model, cache, sched = (_part(header, "model"), _part(header, "cache"),
                           _part(header, "scheduler"))
    max_model_len = model.get("max_model_len") or sched.get("max_model_len")
    fields: dict[str, Any] = {
        "model": sim_model(header.model, max_model_len),
        "max_model_len": max_model_len,
        "block_size": cache.get("block_size") or 16,
        "max_num_batched_tokens": sched.get("max_num_batched_tokens"),
        "max_num_seqs": sched.get("max_num_seqs"),
        "enable_prefix_caching": bool(cache.get("enable_prefix_caching")),
        "seed": model.get("seed") or 0,
    }
    gpu = cache.get("num_gpu_blocks") or cache.get("num_gpu_blocks_override")
    if gpu:
        fields["num_gpu_blocks"] = int(gpu)
    fields.update(KIND_FIELDS[kind_of(header.engine).name](cache, sched))
    return {k: v for k, v in fields.items() if v is not None}


def _v0_fields(cache: dict[str, Any], sched: dict[str, Any]) -> dict[str, Any]:
    chunked = sched.get("chunked_prefill_enabled", sched.get("enable_chunked_prefill"))
    fields = {"enable_chunked_prefill": bool(chunked),
              "preemption_mode": sched.get("preemption_mode") or None}
    cpu = cache.get("num_cpu_blocks")
    if cpu:
        fields["num_cpu_blocks"] = int(cpu)
    return fields


def _v1_fields(cache: dict[str, Any], sched: dict[str, Any]) -> dict[str, Any]:
    return {
        "enable_chunked_prefill": True,
        # a release without the option behaves as it off (0.18 to 0.29)
        "scheduler_reserve_full_isl": bool(sched.get("scheduler_reserve_full_isl", False)),
        "long_prefill_token_threshold": int(sched.get("long_prefill_token_threshold") or 0),
        "async_scheduling": bool(sched.get("async_scheduling")),
        "kv_offloading_gib": float(cache.get("kv_offloading_size") or 0.0)}


KIND_FIELDS = {"v0": _v0_fields, "v1": _v1_fields}
"""Each kind's own engine fields of a re-run, from vLLM's cache and scheduler config."""


def busy_loop_of(recording: Any) -> bool:
    """Whether a V1 recording's engine was stepped by vLLM's engine-core busy loop: a step that
    scheduled nothing, with nothing running or waiting, right after a step that finished
    requests (the loop's step that tells the workers)."""
    if recording.header.engine != "v1":
        return False
    before = None
    for step in recording.steps:
        if (before is not None and before.finished and not step.batched_tokens
                and not step.running and not step.waiting):
            return True
        before = step
    return False


def _initial_policy(header: Any) -> str:
    return str(header.spec.get("policy") or "off")


def _base_fields(header: Any) -> dict[str, Any]:
    """The engine fields of the recording's re-run, as a RunSpec dict."""
    if is_own_sim_run(header) or (header.backend == "gpu"
                                  and "attached" not in (header.engine_config or {})):
        own = RunSpec.from_dict(header.spec, where="the header's spec").to_dict()
        fields = {k: own[k] for k in ENGINE_FIELDS if k in own}
        fields["preset"] = own.get("preset", "seed-5578")
        if header.backend == "gpu":  # its vLLM settings; the sim's shape of its model
            fields.update(engine_spec(header))
        return fields
    return {"preset": "recorded", **engine_spec(header)}


def by_requests(recording: Any) -> RunSpec:
    """The RunSpec that re-runs `recording`'s requests (its path is the trace) on the sim."""
    why = lacks(recording)
    if why is not None:
        raise ConfigError(why)
    header = recording.header
    fields = _base_fields(header)
    fields.update(backend="sim", trace=os.path.abspath(recording.path),
                  trace_format="recording", policy=_initial_policy(header),
                  busy_loop=busy_loop_of(recording))
    try:
        spec = msgspec.convert(fields, RunSpec)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{os.path.basename(recording.path)}: its engine settings cannot be "
                          f"a sim run ({str(exc).replace('`', '')})") from None
    if spec.block_size != block_size_of(header):
        spec = msgspec.structs.replace(spec, block_size=block_size_of(header))
    return spec


def rerun_plan(recording: Any) -> RerunPlan:
    """How to re-run `recording` on the sim (ConfigError, one line, if it cannot be)."""
    header = recording.header
    toggles = [(change.step, change.new) for change in recording.policy_changes]
    if is_own_sim_run(header):
        spec = RunSpec.from_dict(header.spec)
        return RerunPlan(msgspec.structs.replace(spec, backend="sim", toggles=toggles),
                         bursts_of(recording))
    spec = by_requests(recording)
    return RerunPlan(msgspec.structs.replace(spec, toggles=toggles), by_requests=True)


def workload_from_recording(path: str) -> RunSpec:
    """The RunSpec that runs `path`'s workload on the sim: its own spec for a run of the
    observatory on the sim without bursts, else its requests as a trace (the recording itself,
    trace_format "recording") with its engine's settings. The recorded policy changes are its
    toggles. ConfigError (one line) for a recording that cannot be a workload."""
    recording = load_recording(path)
    plan = rerun_plan(recording)
    if plan.bursts:  # bursts are the TUI's key presses: as requests, they re-run anywhere
        return msgspec.structs.replace(by_requests(recording), toggles=plan.spec.toggles)
    return plan.spec


def trace_engine_fields(recording: Any) -> dict[str, Any]:
    """The RunSpec fields (engine, policy, toggles) beside a trace exported from `recording`:
    with the trace they re-run its decisions (`observatory run --config F --trace T`)."""
    header = recording.header
    fields = _base_fields(header)
    if busy_loop_of(recording):
        fields["busy_loop"] = True
    if fields.get("num_cpu_blocks") is not None:
        fields.pop("swap_space_gib", None)  # the blocks it had, not the swap space they came of
    cost = fields.pop("cost", None)
    fields["policy"] = _initial_policy(header)
    toggles = [[change.step, change.new] for change in recording.policy_changes]
    if toggles:
        fields["toggles"] = toggles
    if recording.finished is not None and recording.finished.reason == "max_steps":
        fields["max_steps"] = recording.finished.steps  # it stopped there, and so does its re-run
    if cost and cost != msgspec.to_builtins(RunSpec().cost):
        fields["cost"] = cost
    return fields
