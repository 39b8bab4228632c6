"""Build a real `vllm.LLMEngine` (any supported release) for a RunSpec.

Both backends go through `EngineArgs.create_engine_config()` and `LLMEngine(...)`, so vLLM's
own config checks, block arithmetic, scheduler, block manager, output processing and stats all
run as in production. They differ only in the executor:

- ``sim``: `SimExecutor` (no weights, no model, no GPU). The model's architecture comes from an
  HF config.json shipped in engine/adapters/models/ (or a directory given with --model), which is all
  vLLM needs to size KV-cache blocks.
- ``gpu``: vLLM's own `GPUExecutor` with a real model and tokenizer. Needs CUDA.

What differs by vLLM release (extra engine arguments, how `LLMEngine` is constructed, where its
scheduler is) comes from the installed release's adapter family (engine.adapters.versions).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from engine import logs
from engine.adapters.v0.build_errors import build_errors
from engine.errors import ConfigError
from engine.spec import RunSpec

MODELS_DIR = Path(__file__).parent.parent / "models"
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


def sim_model_dir(model: str) -> str:
    """A packaged config name ("opt-125m") or a local directory holding config.json."""
    packaged = MODELS_DIR / model
    if (packaged / "config.json").is_file():
        return str(packaged)
    path = Path(model).expanduser()
    if (path / "config.json").is_file():
        return str(path)
    choices = ", ".join(sorted(p.parent.name for p in MODELS_DIR.glob("*/config.json")))
    raise ConfigError(f"sim backend needs a model config: {model!r} is neither a packaged one "
                      f"({choices}) nor a directory with config.json")


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def _summarize_config(config: Any) -> dict[str, Any]:
    """The parts of vLLM's EngineConfig a reader of a recording wants to see."""
    out: dict[str, Any] = {}
    for name in ("model_config", "cache_config", "scheduler_config", "parallel_config"):
        part = getattr(config, name, None)
        if part is None:
            continue
        fields = {}
        for key, value in vars(part).items():
            if key.startswith("_") or key in ("hf_config", "hf_text_config"):
                continue
            if isinstance(value, (int, float, str, bool)) or value is None:
                fields[key] = value
            else:
                fields[key] = str(value)
        out[name.removesuffix("_config")] = fields
    return out


def engine_config(spec: RunSpec) -> tuple[Any, dict[str, Any] | None]:
    """vLLM's EngineConfig for `spec` (no engine, no CUDA needed), and on the gpu backend with
    `num_cpu_blocks` the swap-space translation the header records (engine.adapters.v0.swap_space).
    Raises ConfigError."""
    from engine.adapters.versions import family

    fam = family()  # ConfigError naming the supported releases if this one is not
    from vllm import EngineArgs

    if spec.backend == "sim":
        model = sim_model_dir(spec.model_name)
        args = EngineArgs(
            model=model,
            tokenizer=spec.tokenizer or model,
            skip_tokenizer_init=True,
            enable_chunked_prefill=spec.enable_chunked_prefill,
            max_num_batched_tokens=spec.max_num_batched_tokens,
            max_num_seqs=spec.max_num_seqs,
            num_gpu_blocks_override=spec.num_gpu_blocks,
            swap_space=spec.swap_space_gib,
            block_size=spec.block_size,
            seed=spec.seed,
            disable_log_stats=False,
            enforce_eager=True,
            preemption_mode=spec.preemption_mode,
            **fam.engine_kwargs(),
        )
    else:
        args = EngineArgs(
            model=spec.model_name,
            tokenizer=spec.tokenizer,
            enable_chunked_prefill=spec.enable_chunked_prefill,
            max_num_batched_tokens=spec.max_num_batched_tokens,
            max_num_seqs=spec.max_num_seqs,
            num_gpu_blocks_override=spec.num_gpu_blocks,
            swap_space=spec.swap_space_gib,
            block_size=spec.block_size,
            seed=spec.seed,
            disable_log_stats=False,
            preemption_mode=spec.preemption_mode,
        )
    config = _engine_config(args)
    swap_translation = None
    if spec.backend == "gpu" and spec.num_cpu_blocks is not None:
        from engine.adapters.v0 import swap_space

        args.swap_space = swap_space.swap_space_gib_for(spec.num_cpu_blocks,
                                                        swap_space.cache_block_bytes(config))
        config = _engine_config(args)
        swap_translation = swap_space.translation(spec.num_cpu_blocks, config)
    return config, swap_translation


def build_engine(spec: RunSpec) -> BuiltEngine:
    """Construct the engine; raise ConfigError for anything the user can fix."""
    if spec.backend == "gpu" and not cuda_available():
        raise ConfigError("the gpu backend needs a CUDA device and none was found: "
                          "use --backend sim")
    from engine.adapters.versions import family

    fam = family()
    import vllm
    from vllm import LLMEngine
    from vllm.usage.usage_lib import UsageContext

    logs.install()  # in case vLLM was imported (and configured its logging) before us
    config, swap_translation = engine_config(spec)

    count_tokens = None
    stop_token_ids: list[int] = []
    if spec.backend == "sim":
        from engine.adapters.v0.sim_executor import SimExecutor, eos_token_id

        executor_class = SimExecutor.configured(spec.num_gpu_blocks, spec.num_cpu_blocks,
                                                spec.seed, spec.eos_prob, spec.lengths)
        stop_token_ids = [eos_token_id(config.model_config)]
        if spec.tokenizer:
            count_tokens = _local_tokenizer(spec.tokenizer)
    else:
        from vllm.executor.gpu_executor import GPUExecutor

        vocab = config.model_config.get_vocab_size()
        if spec.prompt_len is not None and vocab <= MAX_SYNTHETIC_TOKEN_ID:
            # a real model would index its embedding out of range (a CUDA device-side assert)
            raise ConfigError(f"--prompt-len sends token ids up to {MAX_SYNTHETIC_TOKEN_ID}, "
                              f"beyond {spec.model_name!r}'s vocabulary of {vocab:,}: leave "
                              f"--prompt-len out to send the seed's text")
        executor_class = GPUExecutor
    with build_errors(spec.model_name):
        engine = fam.construct(LLMEngine, config, executor_class=executor_class, log_stats=True,
                               usage_context=UsageContext.ENGINE_CONTEXT)
    config_summary = _summarize_config(config)
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
                              f"{str(exc).splitlines()[0]}") from None


def _local_tokenizer(path: str) -> Callable[[str], list[int]]:
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # transformers raises many types for a bad directory
        raise ConfigError(f"cannot load a tokenizer from {path!r} ({type(exc).__name__}): "
                          f"give a local directory with tokenizer files") from None
    return lambda text: tokenizer(text).input_ids
