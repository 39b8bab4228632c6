"""`observatory run --dry-run` on vLLM's V1 engine: what a V1 run would start with, resolved by
vLLM's own config code, without building an engine.

- ``sim``: the sim environment is set (engine.adapters.v1.platform), so vLLM resolves its CPU
  platform and the whole `VllmConfig` exactly as `build_engine` would; the executor is the sim
  executor given as `distributed_executor_backend`.
- ``gpu``: on a CUDA host, the same. Without CUDA, vLLM's platform detection finds no device
  (UnspecifiedPlatform) and its config cannot be built (its DeviceConfig needs a device): the
  engine arguments are then the ones a run passes to vLLM, as given, and the executor is the one
  vLLM's own `ParallelConfig` and `Executor.get_class` pick for them; a note says so.

Nothing is downloaded (HF_HUB_OFFLINE, set by engine.dry_run): a gpu model that is neither a
local directory nor in the Hugging Face cache is resolved from its packaged config.json.
"""

from __future__ import annotations

import types
from typing import Any

from engine import logs
from engine.adapters.v0.build import Resolved, _dotted, _hub_source, cuda_available, sim_model_dir
from engine.errors import ConfigError
from engine.spec import RunSpec

ARG_NAMES = ("enable_chunked_prefill", "max_num_batched_tokens", "max_num_seqs", "block_size",
             "long_prefill_token_threshold", "scheduler_reserve_full_isl",
             "enable_prefix_caching", "num_gpu_blocks_override", "max_model_len", "dtype",
             "seed", "enforce_eager", "kv_offloading_size", "kv_offloading_backend")
"""The engine arguments shown, scheduling ones first (those a run's decisions depend on)."""

_WHERE = {  # the VllmConfig part that holds each argument once resolved
    "enable_chunked_prefill": "scheduler_config", "max_num_batched_tokens": "scheduler_config",
    "max_num_seqs": "scheduler_config", "long_prefill_token_threshold": "scheduler_config",
    "scheduler_reserve_full_isl": "scheduler_config", "block_size": "cache_config",
    "enable_prefix_caching": "cache_config", "num_gpu_blocks_override": "cache_config",
    "max_model_len": "model_config", "dtype": "model_config", "seed": "model_config",
    "enforce_eager": "model_config", "kv_offloading_size": "cache_config",
    "kv_offloading_backend": "cache_config",
}


def _plain(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return str(value).removeprefix("torch.")


def _resolved_args(config: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ARG_NAMES:
        part = getattr(config, _WHERE[name], None)
        if part is not None and hasattr(part, name):
            out[name] = _plain(getattr(part, name))
    out["device"] = str(config.device_config.device_type)
    return out


def _given_args(args: Any) -> dict[str, Any]:
    return {name: _plain(getattr(args, name)) for name in ARG_NAMES if hasattr(args, name)}


def resolve(spec: RunSpec) -> Resolved:
    """What a V1 run of `spec` would start with. Raises ConfigError."""
    from engine.adapters.versions import require_supported

    release = require_supported()
    if spec.backend == "sim":
        from engine.adapters.v1.platform import prepare_sim_process

        prepare_sim_process()  # before vLLM is imported (its platform), as build_engine does
    from engine.adapters.v1.build import _check_spec, engine_args

    _check_spec(spec)
    notes: list[str] = []
    cuda = cuda_available()
    if spec.backend == "sim":
        resolved_spec = spec
        model_source = f"config {sim_model_dir(spec.model_name)}/config.json (no weights)"
        tokenizer_source = "none (skip_tokenizer_init; prompts are token ids)"
    else:
        resolved_spec, model_source, notes = _hub_source(spec)
        tokenizer_source = spec.tokenizer or f"the model's ({model_source})"
    import vllm
    from vllm.platforms import current_platform
    from vllm.v1.executor.abstract import Executor

    logs.install()
    args = engine_args(resolved_spec)
    platform = _dotted(type(current_platform))
    if spec.backend == "gpu" and not cuda:
        from vllm.config import ParallelConfig

        parallel = ParallelConfig(
            distributed_executor_backend=args.distributed_executor_backend)
        executor = _dotted(Executor.get_class(types.SimpleNamespace(parallel_config=parallel)))
        engine_args_shown = {**_given_args(args), "device": "cuda"}
        notes.append("no CUDA device is present: vLLM's platform detection found none "
                     f"({platform.rsplit('.', 1)[-1]}), so its config cannot be built here; "
                     "the engine arguments are those a run passes, as given, and the executor "
                     "is the one vLLM picks for them")
    else:
        try:
            config = args.create_engine_config()
        except (ValueError, TypeError, OSError, RuntimeError) as exc:
            text = str(exc).strip().splitlines()
            raise ConfigError(f"vLLM rejected the engine config: "
                              f"{text[0] if text else type(exc).__name__}") from None
        executor = _dotted(Executor.get_class(config))
        engine_args_shown = _resolved_args(config)
    return Resolved(backend=spec.backend, vllm_version=vllm.__version__,
                    engine=release.engine, api_family=release.family,
                    executor_class=executor, platform_class=platform,
                    device_type=str(engine_args_shown.get("device", "")),
                    cuda_available=cuda, model=spec.model_name, model_source=model_source,
                    tokenizer_source=tokenizer_source, engine_args=engine_args_shown,
                    notes=notes)
