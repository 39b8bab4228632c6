"""The warnings vLLM and torch print because of how the observatory sets an engine up, not because
of anything the engine decided or the user asked for.

A sim engine has no GPU, no CUDA runtime and no tokenizer, runs its engine core in-process with
fixed request ids and a fixed seed, and hands vLLM token ids rather than text: every V1 run made
torch warn about its own deprecations and a missing CUDA runtime before the observatory's first
line, and the events panel showed vLLM's deprecation and EOS warnings as ⚠ on every run. They
are kept (the recording holds every line vLLM logged, in its own words and level) but shown as
what they are: setup lines, with the INFO lines (`i` in the TUI, `--verbose` on `run`), never
as warnings. Everything else vLLM warns about (a preemption, a config the user's flags made)
still shows.

Each entry is (logger prefix, message prefix, why it is the observatory's setup); a line is a
setup line when both prefixes match. No vLLM import: the UI and the readers use this too.
"""

from __future__ import annotations

import re

SETUP_LINES: tuple[tuple[str, str, str], ...] = (
    ("vllm", "Using None for EOS token id because tokenizer is not initialized",
     "the sim runs without a tokenizer (skip_tokenizer_init)"),
    ("vllm", "Failed to import from vllm._C", "no CUDA here: the sim runs no kernel"),
    ("vllm", "The global random seed is set to",
     "the sim runs the engine core in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0) with a seed"),
    ("vllm", "VLLM_DISABLE_REQUEST_ID_RANDOMIZATION is set",
     "the sim keeps the workload's request ids (same spec, same decisions)"),
    ("vllm", "Passing raw prompts to InputProcessor is deprecated",
     "the sim hands vLLM token ids, as vLLM's own tests do"),
    ("vllm", "Enforce eager set", "the sim compiles nothing (enforce_eager)"),
    ("vllm", "Inductor compilation was disabled", "the sim compiles nothing (enforce_eager)"),
    ("vllm", "Triton is installed but 0 active driver", "no GPU here"),
    ("vllm", "Model Runner V2 requires Triton", "no GPU here: the sim's executor runs no model"),
    ("vllm", "CPU backend prefers block_size is multiples of 32",
     "the sim runs on vLLM's CPU platform and no kernel: a block size costs it nothing"),
    ("vllm", "Reset SSM cache type to float32", "the sim runs on vLLM's CPU platform"),
    ("vllm", "Triton not installed or not compatible", "no GPU here"),
    ("transformers", "`torch_dtype` is deprecated",
     "the packaged model configs say torch_dtype, as the models' own do"),
    ("torch", "torch._opaque_base is deprecated", "torch's own deprecation, set off by vLLM"),
    ("torch", "register_opaque_type is deprecated", "torch's own deprecation, set off by vLLM"),
    ("torch", "typ='value' is deprecated", "torch's own deprecation, set off by vLLM"),
    ("torch", "No CUDA runtime is found", "no CUDA here: the sim needs none"),
)


_TORCH_FORMAT = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ \S+\] ")
"""torch's own log format ("W1207 03:16:07.672000 14346 torch/_opaque_base.py:6] ..."), as an
engine process's captured stderr holds a line torch printed before its logger was taken over."""


def setup_line(logger: str, message: str) -> str | None:
    """Why this log line comes from the observatory's setup of the engine, or None."""
    if logger == "stderr" and _TORCH_FORMAT.match(message):
        logger, message = "torch", _TORCH_FORMAT.sub("", message)
    for prefix, start, why in SETUP_LINES:
        if (logger == prefix or logger.startswith(prefix + ".")) and message.startswith(start):
            return why
    return None
