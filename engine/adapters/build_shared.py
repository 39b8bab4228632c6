"""What both kinds' builds use (engine.adapters.v0.build, engine.adapters.v1.build): the packaged
model configs, whether CUDA is there, the summary of vLLM's EngineConfig a recording carries, and
a dry run's Resolved with its offline model source. Nothing here imports vLLM at the top."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from engine.spec import RunSpec

MODELS_DIR = Path(__file__).parent / "models"


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


def summarize_config(config: Any) -> dict[str, Any]:
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
            if isinstance(value, str) and type(value) is not str:
                # a str subclass (0.33's model revision, huggingface_hub's ResolvedRevision)
                # that msgspec will not encode: its text
                fields[key] = str.__str__(value)
            elif isinstance(value, (int, float, str, bool)) or value is None:
                fields[key] = value
            else:
                fields[key] = str(value)
        out[name.removesuffix("_config")] = fields
    return out


@dataclass
class Resolved:
    """Everything a run of a spec starts with, as vLLM resolves it (no engine, no CUDA)."""

    backend: str
    vllm_version: str
    engine: str  # the engine kind: "v0" (LLMEngine) or "v1" (EngineCore)
    api_family: str  # engine.adapters.<engine>.family_<api_family>
    executor_class: str  # dotted path
    platform_class: str | None  # dotted path; None: the release has no platform classes
    device_type: str
    cuda_available: bool
    model: str  # what the spec names
    model_source: str  # where its config (and on a GPU, its weights) come from
    tokenizer_source: str
    engine_args: dict[str, Any]  # as vLLM's resolved config holds them
    notes: list[str]

    def scheduling_args(self) -> dict[str, Any]:
        """The arguments that decide what the scheduler does (equal for both backends)."""
        return {k: self.engine_args[k] for k in SCHEDULING_ARGS}


SCHEDULING_ARGS = ("enable_chunked_prefill", "max_num_batched_tokens", "max_num_seqs",
                   "block_size", "preemption_mode", "async_output_proc")


def hub_source(spec: RunSpec) -> tuple[RunSpec, str, list[str]]:
    """The gpu model's source, offline: a local directory, the Hugging Face cache, or (for a
    hub model this machine has not downloaded) the packaged copy of its config.json, with a
    note; ConfigError if none. Returns the spec to resolve the config from."""
    import msgspec

    name = spec.model_name
    if Path(name).expanduser().is_dir():
        return spec, f"local directory {Path(name).expanduser().resolve()}", []
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name, "config.json")
    except Exception:  # noqa: BLE001  not a repo id, or no cache: treated as not cached
        cached = None
    if isinstance(cached, str):
        return spec, f"Hugging Face cache {Path(cached).parent}", []
    packaged = MODELS_DIR / name.rsplit("/", 1)[-1]
    if (packaged / "config.json").is_file():
        note = (f"{name} is not in the local Hugging Face cache: a run downloads it; its "
                f"config was resolved from the packaged copy {packaged / 'config.json'}")
        return (msgspec.structs.replace(spec, model=str(packaged)),
                f"hub {name} (not cached)", [note])
    raise ConfigError(f"--dry-run resolves offline, and {name!r} is neither a local directory "
                      f"nor in the Hugging Face cache: download it first (a run would) or "
                      f"give a local directory with --model")
