"""Build a real `vllm.LLMEngine` (any supported release) for a RunSpec.

Both backends go through `EngineArgs.create_engine_config()` and `LLMEngine(...)`, so vLLM's
own config checks, block arithmetic, scheduler, block manager, output processing and stats all
run as in production. Their scheduling arguments are the same (the spec's, plus the family's
`engine_kwargs()`: async output processing off, the device), so a gpu step and a sim step are
recorded alike. They differ in the executor, the model and the platform:

- ``sim``: `SimExecutor` (no weights, no model, no GPU). The model's architecture comes from an
  HF config.json shipped in engine/adapters/models/ (or a directory given with --model), which is all
  vLLM needs to size KV-cache blocks. From 0.10 the config resolves on the sim's platform
  (engine.adapters.v0.sim_platform).
- ``gpu``: the executor vLLM itself picks for the config (the family's `gpu_executor_class`:
  `GPUExecutor` up to 0.6, `UniProcExecutor` from 0.7) with a real model and tokenizer, on the
  platform vLLM detects. Needs CUDA.

What differs by vLLM release (extra engine arguments, the executor, the platform, how
`LLMEngine` is constructed, where its scheduler is) comes from the installed release's adapter
family (engine.adapters.versions). `resolve()` answers everything a run would start with,
without building an engine (`observatory run --dry-run`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

from engine import logs
from engine.adapters.advice import in_our_words
from engine.adapters.build_shared import (Resolved, cuda_available, hub_source, sim_model_dir,
                                          summarize_config)
from engine.adapters.v0.build_errors import build_errors
from engine.errors import ConfigError
from engine.spec import RunSpec

MAX_SYNTHETIC_TOKEN_ID = 50_002  # engine.workload's --prompt-len ids: (i * 7919 + k) % 50000 + 3


@dataclass
class BuiltEngine:
    engine: Any  # vllm.LLMEngine
    scheduler: Any  # its (first) vllm Scheduler
    fans_out: bool  # vLLM 0.6.4+: an n>1 request runs as n single-sequence groups
    model: str
    vllm_version: str
    max_model_len: int
    engine_config: dict[str, Any]
    count_tokens: Callable[[str], list[int]] | None  # sim with --tokenizer: real token ids
    text_prompts: bool  # gpu: send prompt text and let vLLM tokenize
    stop_token_ids: list[int]  # sim: the model's EOS id, which vLLM cannot know without a tokenizer


def engine_args(spec: RunSpec, fam: ModuleType) -> Any:
    """vLLM's EngineArgs for `spec`: the same scheduling arguments for both backends (the
    spec's and the family's `engine_kwargs()`); the model, the tokenizer and CUDA graphs are
    the backend's."""
    from vllm import EngineArgs

    common = dict(enable_chunked_prefill=spec.enable_chunked_prefill,
                  max_num_batched_tokens=spec.max_num_batched_tokens,
                  max_num_seqs=spec.max_num_seqs, num_gpu_blocks_override=spec.num_gpu_blocks,
                  swap_space=spec.swap_space_gib, block_size=spec.block_size, seed=spec.seed,
                  disable_log_stats=False, preemption_mode=spec.preemption_mode,
                  max_model_len=spec.max_model_len, **fam.engine_kwargs())
    if spec.enable_prefix_caching:  # a re-run of a V0 engine that had it (else vLLM's default)
        common["enable_prefix_caching"] = True
    if spec.backend == "sim":
        model = sim_model_dir(spec.model_name)
        return EngineArgs(model=model, tokenizer=spec.tokenizer or model,
                          skip_tokenizer_init=True, enforce_eager=True, **common)
    return EngineArgs(model=spec.model_name, tokenizer=spec.tokenizer, **common)


def engine_config(spec: RunSpec) -> tuple[Any, dict[str, Any] | None]:
    """vLLM's EngineConfig for `spec` (no engine, no CUDA needed), and on the gpu backend with
    `num_cpu_blocks` the swap-space translation the header records (engine.adapters.v0.swap_space).
    Raises ConfigError."""
    from engine.adapters.versions import family

    fam = family(spec.backend)  # ConfigError naming the supported releases if this one is not
    args = engine_args(spec, fam)
    config = _engine_config(args)
    swap_translation = None
    if spec.backend == "gpu" and spec.num_cpu_blocks is not None:
        from engine.adapters.v0 import swap_space

        args.swap_space = swap_space.swap_space_gib_for(spec.num_cpu_blocks,
                                                        swap_space.cache_block_bytes(config))
        config = _engine_config(args)
        swap_translation = swap_space.translation(spec.num_cpu_blocks, config)
    return config, swap_translation


def executor_class(spec: RunSpec, config: Any) -> type:
    """The executor a `spec` engine runs: the sim's, or the one vLLM itself picks (by family)."""
    from engine.adapters.versions import family

    fam = family(spec.backend)
    if spec.backend == "sim":
        from engine.adapters.v0.sim_executor import SimExecutor

        from engine.output_lengths import OutputLengths

        forced = spec.trace is not None  # a trace forces each request's output length
        return SimExecutor.configured(spec.num_gpu_blocks, spec.num_cpu_blocks, spec.seed,
                                      0.0 if forced else spec.eos_prob,
                                      OutputLengths() if forced else spec.lengths)
    return fam.gpu_executor_class(config)


def build_engine(spec: RunSpec) -> BuiltEngine:
    """Construct the engine; raise ConfigError for anything the user can fix."""
    if spec.backend == "gpu" and not cuda_available():
        raise ConfigError("the gpu backend needs a CUDA device and none was found: "
                          "use --backend sim")
    from engine.adapters.versions import family

    fam = family(spec.backend)
    import vllm
    from vllm import LLMEngine
    from vllm.usage.usage_lib import UsageContext

    logs.install()  # in case vLLM was imported (and configured its logging) before us
    config, swap_translation = engine_config(spec)
    executor = executor_class(spec, config)

    count_tokens = None
    stop_token_ids: list[int] = []
    if spec.backend == "sim":
        from engine.adapters.v0.sim_executor import eos_token_id

        stop_token_ids = [eos_token_id(config.model_config)]
        if spec.tokenizer:
            count_tokens = _local_tokenizer(spec.tokenizer)
    else:
        vocab = config.model_config.get_vocab_size()
        if spec.prompt_len is not None and vocab <= MAX_SYNTHETIC_TOKEN_ID:
            # a real model would index its embedding out of range (a CUDA device-side assert)
            raise ConfigError(f"--prompt-len sends token ids up to {MAX_SYNTHETIC_TOKEN_ID}, "
                              f"beyond {spec.model_name!r}'s vocabulary of {vocab:,}: leave "
                              f"--prompt-len out to send the seed's text")
    with build_errors(spec.model_name):
        engine = fam.construct(LLMEngine, config, executor_class=executor, log_stats=True,
                               usage_context=UsageContext.ENGINE_CONTEXT)
    config_summary = summarize_config(config)
    if swap_translation is not None:
        config_summary["swap_space_from_num_cpu_blocks"] = swap_translation
    return BuiltEngine(
        engine=engine,
        scheduler=fam.scheduler_of(engine),
        fans_out=fam.FANS_OUT,
        model=spec.model_name,
        vllm_version=vllm.__version__,
        max_model_len=config.model_config.max_model_len,
        engine_config=config_summary,
        count_tokens=count_tokens,
        text_prompts=spec.backend == "gpu" and spec.prompt_len is None,
        stop_token_ids=stop_token_ids,
    )


def _engine_config(args: Any) -> Any:
    """vLLM's EngineConfig for `args`; its complaints (bad knob, unknown model) as one line."""
    with build_errors(args.model):  # an OSError (no such model, no config) names its cause
        try:
            return args.create_engine_config()
        except ValueError as exc:
            raise ConfigError(f"vLLM rejected the engine config: "
                              f"{in_our_words(str(exc).splitlines()[0])}") from None


def _local_tokenizer(path: str) -> Callable[[str], list[int]]:
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # transformers raises many types for a bad directory
        raise ConfigError(f"cannot load a tokenizer from {path!r} ({type(exc).__name__}): "
                          f"give a local directory with tokenizer files") from None
    return lambda text: tokenizer(text).input_ids


# ---- resolve: what a run would start with, without building it (observatory run --dry-run) --

GIB = 1 << 30


def _dotted(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def resolve(spec: RunSpec) -> Resolved:
    """What `build_engine(spec)` would start with: vLLM's version, the adapter family, the
    executor and platform classes, the engine arguments as vLLM's config holds them, the model
    and tokenizer sources. Builds no engine and needs no CUDA (a gpu spec on a machine without
    one resolves and says so in `notes`). Raises ConfigError."""
    from engine.adapters.versions import family, require_supported

    release = require_supported()
    fam = family(spec.backend)
    import vllm

    from engine.adapters.v0 import swap_space

    logs.install()
    notes: list[str] = []
    cuda = cuda_available()
    if spec.backend == "gpu":
        resolved_spec, model_source, notes = hub_source(spec)
        tokenizer_source = spec.tokenizer or f"the model's ({model_source})"
        if not cuda:
            notes.append("no CUDA device is present: a gpu run stops before building the "
                         "engine; everything above is what it would start with")
    else:
        resolved_spec = spec
        model_source = f"config {sim_model_dir(spec.model_name)}/config.json (no weights)"
        tokenizer_source = (spec.tokenizer if spec.tokenizer else
                            "none (skip_tokenizer_init; prompt lengths from the text)")
    config, translation = engine_config(resolved_spec)
    executor = executor_class(resolved_spec, config)
    block_bytes = swap_space.cache_block_bytes(config)
    if spec.backend == "sim" and spec.num_cpu_blocks is not None:
        cpu_blocks = spec.num_cpu_blocks  # the sim executor reports it as given
    else:
        cpu_blocks = swap_space.derived_cpu_blocks(config)
    scheduler, cache, model = config.scheduler_config, config.cache_config, config.model_config
    args = {
        "enable_chunked_prefill": bool(scheduler.chunked_prefill_enabled),
        "max_num_batched_tokens": scheduler.max_num_batched_tokens,
        "max_num_seqs": scheduler.max_num_seqs,
        "block_size": cache.block_size,
        "preemption_mode": getattr(scheduler, "preemption_mode", None),
        "async_output_proc": bool(getattr(model, "use_async_output_proc", False)),
        "num_gpu_blocks_override": cache.num_gpu_blocks_override,
        "swap_space_gib": cache.swap_space_bytes / GIB,
        "cpu_block_bytes": block_bytes,
        "num_cpu_blocks": cpu_blocks,
        "device": str(config.device_config.device_type),
        "dtype": str(model.dtype).removeprefix("torch."),
        "max_model_len": model.max_model_len,
        "enforce_eager": bool(model.enforce_eager),
        "seed": model.seed,
    }
    if translation is not None:
        args["swap_space_from_num_cpu_blocks"] = translation
    platform = fam.platform_class()
    if spec.backend == "sim":
        executor_name = "engine.adapters.v0.sim_executor.SimExecutor"  # configured per spec
    else:
        executor_name = _dotted(executor)
        if platform is not None and platform.endswith(".UnspecifiedPlatform"):
            notes.append("vLLM's platform detection found no device on this machine "
                         "(UnspecifiedPlatform); on a CUDA host it detects its CUDA platform")
        notes += getattr(fam, "platform_notes", lambda: [])()
    return Resolved(backend=spec.backend, vllm_version=vllm.__version__,
                    engine=release.engine, api_family=release.family,
                    executor_class=executor_name, platform_class=platform,
                    device_type=args["device"], cuda_available=cuda, model=spec.model_name,
                    model_source=model_source, tokenizer_source=tokenizer_source,
                    engine_args=args, notes=notes)


def shutdown_engine(engine: Any) -> None:
    """Shut a V0 engine down as vLLM's own tests do: its executor (workers, on a GPU their
    model and KV cache), then the process's distributed state, then the CUDA cache, so the next
    engine in this process starts on a free device. Never raises: it runs in `finally` blocks."""
    import gc

    executor = getattr(engine, "model_executor", None)
    try:
        if executor is not None:
            executor.shutdown()
        from vllm.distributed import parallel_state

        for name in ("destroy_model_parallel", "destroy_distributed_environment"):
            getattr(parallel_state, name, lambda: None)()
    except Exception:  # noqa: BLE001  best effort: the engine is being thrown away
        pass
    gc.collect()
    if cuda_available():
        import torch

        torch.cuda.empty_cache()
