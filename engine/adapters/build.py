"""Build a real `vllm.LLMEngine` 0.5.0.post1 for a RunSpec.

Both backends go through `EngineArgs.create_engine_config()` and `LLMEngine(...)`, so vLLM's
own config checks, block arithmetic, scheduler, block manager, output processing and stats all
run as in production. They differ only in the executor:

- ``sim``: `SimExecutor` (no weights, no model, no GPU). The model's architecture comes from an
  HF config.json shipped in engine/adapters/models/ (or a directory given with --model), which is all
  vLLM needs to size KV-cache blocks.
- ``gpu``: vLLM's own `GPUExecutor` with a real model and tokenizer. Needs CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from engine import logs
from engine.errors import ConfigError
from engine.spec import RunSpec

MODELS_DIR = Path(__file__).parent / "models"


@dataclass
class BuiltEngine:
    engine: Any  # vllm.LLMEngine
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


def build_engine(spec: RunSpec) -> BuiltEngine:
    """Construct the engine; raise ConfigError for anything the user can fix."""
    if spec.backend == "gpu" and not cuda_available():
        raise ConfigError("the gpu backend needs a CUDA device and none was found: "
                          "use --backend sim")
    import vllm
    from vllm import EngineArgs, LLMEngine
    from vllm.usage.usage_lib import UsageContext

    logs.install()  # in case vLLM was imported (and configured its logging) before us
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
        )
    try:
        config = args.create_engine_config()
    except (ValueError, OSError) as exc:
        raise ConfigError(f"vLLM rejected the engine config: {str(exc).splitlines()[0]}") from None

    count_tokens = None
    stop_token_ids: list[int] = []
    if spec.backend == "sim":
        from engine.adapters.sim_executor import SimExecutor, eos_token_id

        executor_class = SimExecutor.configured(spec.num_gpu_blocks, spec.num_cpu_blocks,
                                                spec.seed, spec.eos_prob, spec.lengths)
        stop_token_ids = [eos_token_id(config.model_config)]
        if spec.tokenizer:
            count_tokens = _local_tokenizer(spec.tokenizer)
    else:
        if spec.num_cpu_blocks is not None:
            raise ConfigError("--num-cpu-blocks is a sim-backend knob; on the gpu backend vLLM "
                              "derives CPU blocks from --swap-space")
        from vllm.executor.gpu_executor import GPUExecutor

        executor_class = GPUExecutor
    engine = LLMEngine(**config.to_dict(),
                       executor_class=executor_class, log_stats=True,
                       usage_context=UsageContext.ENGINE_CONTEXT)
    return BuiltEngine(
        engine=engine,
        model=spec.model_name,
        vllm_version=vllm.__version__,
        max_model_len=config.model_config.max_model_len,
        engine_config=_summarize_config(config),
        count_tokens=count_tokens,
        text_prompts=spec.backend == "gpu" and spec.prompt_len is None,
        stop_token_ids=stop_token_ids,
    )


def _local_tokenizer(path: str) -> Callable[[str], list[int]]:
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # transformers raises many types for a bad directory
        raise ConfigError(f"cannot load a tokenizer from {path!r} ({type(exc).__name__}): "
                          f"give a local directory with tokenizer files") from None
    return lambda text: tokenizer(text).input_ids
