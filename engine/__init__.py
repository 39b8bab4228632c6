"""The vLLM side of the observatory: engine construction, the scheduler hooks, the per-step record
stream, sessions, recordings and everything computed from them. Nothing here imports textual.

Importing this package settles how vLLM behaves in this process before vLLM itself is imported
(unless vLLM came first, see GUEST):
its log lines go to `engine.logs` (never straight to the terminal, where they would corrupt a TUI
or a `--record -` stream), and its usage-stats reporter stays off (these machines have no
network, and a run should not phone home anyway).
"""

import os
import sys

__version__ = "0.1.0"

GUEST = "vllm" in sys.modules
"""Imported into a process whose vLLM came first: the user's own `vllm serve`, whose config
resolves `--distributed-executor-backend engine.SimExecutor`. That process's logging and
environment are the user's, so neither is touched (capturing vLLM's logs there would silence
the user's server, and the environment is inherited by its engine-core process)."""

if not GUEST:
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from engine import logs as _logs  # (must run before anything imports vllm)

    _logs.install()


def __getattr__(name: str):
    """`engine.attach(scheduler, policy="off")` and `engine.SimExecutor` (the dotted path
    `vllm serve --distributed-executor-backend engine.SimExecutor` takes) without importing
    vLLM until one is used."""
    if name == "attach":
        from engine.adapters.v0.hooks import attach

        return attach
    if name == "SimExecutor":
        from engine.adapters.v1.sim_executor import SimExecutor

        return SimExecutor
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
