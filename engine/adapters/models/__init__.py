"""Model configs packaged for the sim backend (config.json only: no weights), and the context a
model config gives, read without vLLM."""

from __future__ import annotations

import json
from pathlib import Path

CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                "max_sequence_length", "max_seq_length", "seq_len", "model_max_length")
"""The config keys vLLM derives max_model_len from (the smallest of those present wins)."""


def config_context(model_dir: str | Path) -> int | None:
    """The context in tokens `model_dir`'s config.json gives, as vLLM derives it, or None
    where it cannot be told without vLLM (no such file, RoPE scaling, no key)."""
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict) or config.get("rope_scaling"):
        return None
    found = [v for k in CONTEXT_KEYS if isinstance(v := config.get(k), int) and v > 0]
    return min(found) if found else None
