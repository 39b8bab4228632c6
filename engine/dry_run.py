"""`observatory run --dry-run`: what a run would start with, resolved and printed, no engine.

A user about to start a long run on a remote GPU host checks its setup first: which vLLM and
adapter family, which executor and platform vLLM picks, the engine arguments as vLLM's own
config holds them (the scheduling ones, async output, the swap space and the CPU blocks it
implies), and where the model and tokenizer come from. Everything is resolved by the code a
run uses (engine.adapters.v0.build.resolve), offline: nothing is downloaded (HF_HUB_OFFLINE).
Without CUDA a gpu dry run still resolves, says that no CUDA device is present, and exits 0.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from engine.safe_text import safe
from engine.spec import RunSpec


def resolve(spec: RunSpec) -> dict[str, Any]:
    """The resolution of `spec` as plain data (the --json form). Raises ConfigError."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # before anything imports huggingface_hub: no download
    from engine.adapters.driver import resolve_engine

    return dataclasses.asdict(resolve_engine(spec))


def format_text(data: dict[str, Any]) -> str:
    """The readable form: one fact a line, the engine arguments indented."""
    lines = [
        f"backend      {data['backend']}",
        f"vLLM         {data['vllm_version']} (engine {data['engine']}, adapter family "
        f"{data['api_family']})",
        f"executor     {data['executor_class']}",
        f"platform     {data['platform_class'] or '(none: this vLLM has no platform classes)'}"
        f", device {data['device_type']}",
        f"CUDA         {'present' if data['cuda_available'] else 'no CUDA device present'}",
        f"model        {safe(data['model'])}: {safe(data['model_source'])}",
        f"tokenizer    {safe(data['tokenizer_source'])}",
        "engine arguments (as vLLM's config holds them):",
    ]
    width = max((len(key) for key in data["engine_args"]), default=0)
    for key, value in data["engine_args"].items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        elif isinstance(value, float):
            value = f"{value:.6g}"
        lines.append(f"  {key:<{max(24, width)}} {value}")
    lines += [f"note: {safe(note)}" for note in data["notes"]]
    return "\n".join(lines)


def run(spec: RunSpec, as_json: bool) -> int:
    """Print the resolution of `spec` on stdout; 0, or ConfigError (one line, exit 2)."""
    import sys

    data = resolve(spec)
    sys.stdout.write((json.dumps(data, indent=1) if as_json else format_text(data)) + "\n")
    sys.stdout.flush()
    return 0
