"""The vLLM side of the observatory: engine construction, the scheduler hooks, the per-step record
stream, sessions, recordings and everything computed from them. Nothing here imports textual.

Importing this package settles how vLLM behaves in this process before vLLM itself is imported:
its log lines go to `engine.logs` (never straight to the terminal, where they would corrupt a TUI
or a `--record -` stream), and its usage-stats reporter stays off (these machines have no
network, and a run should not phone home anyway).
"""

import os

__version__ = "0.1.0"

os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from engine import logs as _logs  # noqa: E402  (must run before anything imports vllm)

_logs.install()


def __getattr__(name: str):
    """`engine.attach(scheduler, policy="off")` without importing vLLM until it is used."""
    if name == "attach":
        from engine.adapters.v0.hooks import attach

        return attach
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
