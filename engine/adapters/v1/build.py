"""Build vLLM's V1 engine (0.33) for a RunSpec: the real `LLMEngine` with its EngineCore in this
process, so its Scheduler and KVCacheManager run as in production and the hooks can see them.

- ``sim``: the executor is engine.adapters.v1.sim_executor.SimExecutor, given to vLLM as the
  dotted path `distributed_executor_backend` takes; the model's architecture comes from a
  packaged config.json (engine/adapters/models) or a directory with one, which is all vLLM
  needs to size KV blocks. No tokenizer: prompts are token ids. The process environment a sim
  engine needs is set here and only here (engine.adapters.v1.platform).
- ``gpu``: vLLM's own executor with a real model (not tested here: this machine has no GPU).

`num_gpu_blocks_override` is the pool vLLM builds, its null block included; the records count
the usable blocks (one fewer), as vLLM's own KV usage does.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

from engine import logs
from engine.adapters.advice import in_our_words
from engine.adapters.build_shared import cuda_available, sim_model_dir, summarize_config
from engine.adapters.v1.current import fam, tier
from engine.errors import ConfigError
from engine.spec import RunSpec


@dataclass
class BuiltV1Engine:
    engine: Any  # vllm.v1.engine.llm_engine.LLMEngine
    engine_core: Any  # its in-process EngineCore (holds model_executor)
    scheduler: Any  # the EngineCore's Scheduler
    model: str
    vllm_version: str
    max_model_len: int
    engine_config: dict[str, Any]


def _check_spec(spec: RunSpec) -> None:
    """What the V1 line of the observatory does not run, as one line each."""
    if spec.prompt_len is None and spec.trace is None:  # a trace gives every prompt's length
        raise ConfigError("the V1 engine needs --prompt-len (the seed's prompts are V0's "
                          "scheduler.py, which vLLM 0.33 does not have): use a v1-* preset, "
                          "e.g. --preset v1-thrash")
    if spec.n != 1 and spec.trace is None:  # a trace's samples: --trace-n (engine.workload)
        raise ConfigError(f"--n {spec.n}: the V1 line runs one sample per request: use --n 1 "
                          f"(or a v1-* preset)")
    if spec.preemption_mode == "swap":
        raise ConfigError("V1 preempts only by recompute: leave --preemption-mode out, or use "
                          "a v1-* preset (v1-thrash, v1-concurrent-prefill)")
    if spec.eos_prob > 0:
        raise ConfigError("--eos-prob is V0's: a V1 sim request ends at its own max_tokens "
                          "(--min-tokens and --max-tokens draw it)")
    if spec.async_scheduling and not fam.HAS_ASYNC_SIM:
        raise ConfigError("--async-scheduling runs on the sim from vLLM 0.33 (its batch queue's "
                          "execute_model/sample_tokens split): use the vllm033 or vllm034 "
                          "extra, or drop --async-scheduling")
    if spec.tokenizer:
        raise ConfigError("--tokenizer is not supported on the V1 line: prompts are token ids "
                          "(--prompt-len)")


def engine_args(spec: RunSpec) -> Any:
    from vllm import EngineArgs

    from engine.adapters.v1.sim_executor import DOTTED_PATH

    common = dict(
        enable_chunked_prefill=True,
        max_num_batched_tokens=spec.max_num_batched_tokens,
        max_num_seqs=spec.max_num_seqs,
        num_gpu_blocks_override=spec.num_gpu_blocks,
        block_size=spec.block_size,
        seed=spec.seed,
        enable_prefix_caching=spec.enable_prefix_caching,
        long_prefill_token_threshold=spec.long_prefill_token_threshold,
        max_model_len=spec.max_model_len,
        disable_log_stats=False,
        # explicit either way: the sim executor supports it, and vLLM's default (None) would
        # turn it on before the CPU platform turns it off again
        async_scheduling=spec.async_scheduling,
        **fam.engine_kwargs(spec),
        **tier.engine_kwargs(spec),
    )
    if spec.backend == "sim":
        model = sim_model_dir(spec.model_name)
        return EngineArgs(model=model, skip_tokenizer_init=True, enforce_eager=True,
                          distributed_executor_backend=DOTTED_PATH, **common)
    return EngineArgs(model=spec.model_name, tokenizer=spec.tokenizer, **common)


def build_engine(spec: RunSpec) -> BuiltV1Engine:
    """Construct the engine; raise ConfigError for anything the user can fix."""
    _check_spec(spec)
    if spec.backend == "gpu" and not cuda_available():
        raise ConfigError("the gpu backend needs a CUDA device and none was found: "
                          "use --backend sim")
    if spec.backend == "sim":
        from engine.adapters.v1.platform import prepare_sim_process

        prepare_sim_process()  # before vLLM reads its environment
    import vllm

    logs.install()
    args = engine_args(spec)
    try:
        engine = fam.construct(args)
    except ConfigError:
        raise
    except (ValueError, TypeError, OSError) as exc:
        text = str(exc).strip().splitlines()
        raise ConfigError(f"vLLM rejected the engine config: "
                          f"{in_our_words(text[0]) if text else type(exc).__name__}") from None
    engine_core = fam.engine_core_of(engine)
    config = fam.vllm_config_of(engine)
    scheduler = fam.scheduler_of(engine_core)
    fam.configure(scheduler, spec)
    return BuiltV1Engine(
        engine=engine,
        engine_core=engine_core,
        scheduler=scheduler,
        model=spec.model_name,
        vllm_version=vllm.__version__,
        max_model_len=config.model_config.max_model_len,
        engine_config=summarize_config(config),
    )


def _given_args(args: Any, spec: RunSpec) -> dict[str, Any]:
    """The dry run's engine arguments as a run passes them to vLLM (unresolved: vLLM could not
    build its config here), under the names the resolved form uses."""
    transfer = getattr(args, "kv_transfer_config", None)
    return {
        "enable_chunked_prefill": args.enable_chunked_prefill,
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "max_num_seqs": args.max_num_seqs,
        "long_prefill_token_threshold": args.long_prefill_token_threshold,
        "scheduler_reserve_full_isl": fam.full_isl_setting(args, spec),
        "block_size": args.block_size,
        "enable_prefix_caching": args.enable_prefix_caching,
        "num_gpu_blocks_override": args.num_gpu_blocks_override,
        "kv_offloading_size_gib": args.kv_offloading_size,
        "kv_connector": getattr(transfer, "kv_connector", None) if transfer else None,
        "device": "cuda",
        "dtype": str(args.dtype),
        "max_model_len": args.max_model_len,
        "enforce_eager": bool(args.enforce_eager),
        "seed": args.seed,
    }


def resolve(spec: RunSpec) -> Any:
    """What `build_engine(spec)` would start with (`observatory run --dry-run` on V1): vLLM's
    own VllmConfig for the spec's EngineArgs, resolved as `LLMEngine.from_engine_args` does
    first, with no engine built. The same Resolved as the V0 line's (engine.adapters.build_shared),
    with V1's arguments: no swap space, prefix caching, the full-ISL rule and the CPU tier."""
    from engine.adapters.build_shared import Resolved, hub_source
    from engine.adapters.versions import require_supported

    release = require_supported()
    _check_spec(spec)
    notes: list[str] = []
    cuda = cuda_available()
    if spec.backend == "sim":
        from engine.adapters.v1.platform import prepare_sim_process

        prepare_sim_process()
        resolved_spec = spec
        model_source = f"config {sim_model_dir(spec.model_name)}/config.json (no weights)"
        tokenizer_source = "none (skip_tokenizer_init; prompts are token ids)"
    else:
        resolved_spec, model_source, notes = hub_source(spec)
        tokenizer_source = spec.tokenizer or f"the model's ({model_source})"
        if not cuda:
            notes.append("no CUDA device is present: a gpu run stops before building the "
                         "engine; everything above is what it would start with")
    import vllm

    logs.install()
    from vllm.platforms import current_platform
    from vllm.v1.executor.abstract import Executor

    platform = type(current_platform)
    platform_name = f"{platform.__module__}.{platform.__qualname__}"
    args_in = engine_args(resolved_spec)
    if spec.backend == "gpu" and not cuda:
        # vLLM 0.33 detects no platform without a device (UnspecifiedPlatform) and cannot build
        # its config (DeviceConfig needs a device): say what a run passes, as given, and the
        # executor vLLM's own ParallelConfig and Executor.get_class pick for it
        from vllm.config import ParallelConfig

        parallel = ParallelConfig(
            distributed_executor_backend=args_in.distributed_executor_backend)
        executor = Executor.get_class(types.SimpleNamespace(parallel_config=parallel))
        notes.append(f"vLLM's platform detection found no device ({platform.__qualname__}), "
                     "so its config cannot be built here: the engine arguments are those a "
                     "run passes, as given, and the executor the one vLLM picks for them")
        given = _given_args(args_in, resolved_spec)
        return Resolved(backend=spec.backend, vllm_version=vllm.__version__,
                        engine=release.engine, api_family=release.family,
                        executor_class=f"{executor.__module__}.{executor.__qualname__}",
                        platform_class=platform_name, device_type=given["device"],
                        cuda_available=cuda, model=spec.model_name,
                        model_source=model_source, tokenizer_source=tokenizer_source,
                        engine_args=given, notes=notes)
    try:
        config = args_in.create_engine_config()
    except (ValueError, TypeError, OSError, RuntimeError) as exc:
        text = str(exc).strip().splitlines()
        raise ConfigError(f"vLLM rejected the engine config: "
                          f"{in_our_words(text[0]) if text else type(exc).__name__}") from None
    scheduler, cache, model = config.scheduler_config, config.cache_config, config.model_config
    args: dict[str, Any] = {
        "enable_chunked_prefill": bool(scheduler.enable_chunked_prefill),
        "max_num_batched_tokens": scheduler.max_num_batched_tokens,
        "max_num_seqs": scheduler.max_num_seqs,
        "long_prefill_token_threshold": scheduler.long_prefill_token_threshold,
        "scheduler_reserve_full_isl": fam.full_isl_setting(scheduler, resolved_spec),
        "block_size": cache.block_size,
        "enable_prefix_caching": bool(cache.enable_prefix_caching),
        "num_gpu_blocks_override": cache.num_gpu_blocks_override,
        "kv_offloading_size_gib": cache.kv_offloading_size,
        "kv_connector": (config.kv_transfer_config.kv_connector
                         if config.kv_transfer_config is not None else None),
        "device": str(config.device_config.device_type),
        "dtype": str(model.dtype).removeprefix("torch."),
        "max_model_len": model.max_model_len,
        "enforce_eager": bool(model.enforce_eager),
        "seed": model.seed,
    }
    if spec.backend == "sim":
        from engine.adapters.v1.sim_executor import DOTTED_PATH as executor_name
    else:  # the class vLLM's engine core instantiates for this config
        executor = Executor.get_class(config)
        executor_name = f"{executor.__module__}.{executor.__qualname__}"
    return Resolved(backend=spec.backend, vllm_version=vllm.__version__,
                    engine=release.engine, api_family=release.family,
                    executor_class=executor_name,
                    platform_class=platform_name,
                    device_type=args["device"], cuda_available=cuda, model=spec.model_name,
                    model_source=model_source, tokenizer_source=tokenizer_source,
                    engine_args=args, notes=notes)
