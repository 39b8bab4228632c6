"""The vLLM side of the observatory: engine construction, the scheduler hooks, the per-step record
stream, sessions, recordings and everything computed from them. Nothing here imports textual.

Importing this package settles how vLLM behaves in this process before vLLM itself is imported:
its log lines go to `engine.logs` (never straight to the terminal, where they would corrupt a TUI
or a `--record -` stream), and its usage-stats reporter stays off (these machines have no
network, and a run should not phone home anyway).
Except inside someone else's program: under `observatory exec` (OBSERVATORY_EMBEDDED=1, set by
its sitecustomize) or when vLLM was imported before this package (a user's script calling
`engine.attach(llm)`), vLLM's logging is the user's and stays as they configured it.
"""

import os
import sys

__version__ = "0.1.0"

EMBEDDED = os.environ.get("OBSERVATORY_EMBEDDED") == "1" or "vllm" in sys.modules

OWN_DEFAULTS = {"VLLM_CONFIGURE_LOGGING": "0", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                "TOKENIZERS_PARALLELISM": "false"}
SET_HERE: list[str] = []  # which of OWN_DEFAULTS this process set (exec leaves them out)

if not EMBEDDED:
    for _name, _value in OWN_DEFAULTS.items():
        if _name not in os.environ:
            os.environ[_name] = _value
            SET_HERE.append(_name)

    from engine import logs as _logs  # noqa: E402  (must run before anything imports vllm)

    _logs.install()


def __getattr__(name: str):
    """`engine.attach(target, ...)` and `engine.ObservedScheduler` without importing vLLM
    until they are used (engine.attached.api)."""
    if name in ("attach", "ObservedScheduler", "SimExecutor"):
        from engine.attached import api

        return getattr(api, name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
