"""vLLM's advice in the observatory's words: a refusal names the flags a user can give here.

vLLM's own messages tell the user of `LLM(...)` what to change: "Try increasing
`gpu_memory_utilization` ... Decreasing `max_model_len` also reduces what is needed". The
observatory takes neither argument: its KV cache is `--num-gpu-blocks` and the context is
`--max-model-len`. A one-line refusal that quoted vLLM's names sent its reader looking for
options that do not exist, so each engine argument vLLM names is said as the flag that sets it
(engine.options: a RunSpec field's flag, or the flag that stands in for an argument the
observatory sets itself), and the sentence about the CPU backend's memory (the sim reserves
none) is left out. No vLLM import.
"""

from __future__ import annotations

import re

STANDS_IN = {
    "gpu_memory_utilization": "--num-gpu-blocks",  # the sim's KV cache is a block count
    "num_gpu_blocks_override": "--num-gpu-blocks",
    "kv_cache_memory_bytes": "--num-gpu-blocks",
    "kv_offloading_size": "--kv-offloading-size",
}
"""vLLM's engine arguments the observatory sets itself, and the flag that decides each."""
_DROPPED = re.compile(r" ?\(this flag also controls CPU memory reservation on the CPU backend, "
                      r"despite its name\)| when initializing the engine")


def _flags() -> dict[str, str]:
    from engine.options import options
    from engine.spec import RunSpec

    return {**{name: option.flag for name, option in options(RunSpec).items()}, **STANDS_IN}


def in_our_words(message: str) -> str:
    """`message` with each engine argument it names (`max_model_len`, gpu_memory_utilization)
    replaced by the observatory's flag for it; anything else as vLLM said it."""
    flags = _flags()
    names = "|".join(sorted(map(re.escape, flags), key=len, reverse=True))
    # a name in backticks, or a bare one with an underscore: never "model" or "seed" in prose
    pattern = re.compile(rf"`({names})`|\b({names})\b")

    def flag(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return flags[name] if match.group(1) or "_" in name else name

    return pattern.sub(flag, _DROPPED.sub("", message))
