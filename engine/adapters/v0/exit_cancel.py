"""The cancellation vLLM 0.5.0's AsyncLLMEngine swallows at exit, handed back (attached mode).

Whose bug: vLLM's, on Python 3.11 and older. 0.5.0's `run_engine_loop` wraps each step in
`asyncio.wait_for(self.engine_step(), ...)`. When `asyncio.run(main())` returns it cancels every
task left, the engine loop included; if the loop's last `engine_step` (an idle one: no request
left, so it never awaits the executor) has already finished but `wait_for` has not yet woken,
`wait_for` returns the step's result instead of raising CancelledError (CPython gh-86296, fixed
in 3.12 only). The loop then waits for new requests for good, and `asyncio.run` waits for it:
the program never exits. vLLM fixed it upstream in PR #5654 (0.5.1, "AsyncLLMEngine hangs with
asyncio.run", fixing #4789 and #3996) by moving to `asyncio.timeout`. It does not depend on the
observatory: any program whose `main` returns right after its last output meets it, and the
sim, whose steps take microseconds, meets it every time.

What the observatory does (only in processes `observatory exec` attaches to, only where
`run_engine_loop` still calls `asyncio.wait_for`, only on Python < 3.12): vLLM's RequestTracker
waits for new requests through `wait_for_new_requests`; wrapped, it first asks whether the task
calling it has been asked to cancel (`Task.cancelling()`), and if so raises the CancelledError
that `wait_for` dropped. A task nobody cancelled never sees a difference.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
from typing import Any


def swallows_exit_cancel(engine_loop: Any) -> bool:
    """Whether `engine_loop` (AsyncLLMEngine.run_engine_loop) is the release that meets gh-86296
    on this Python: it calls `asyncio.wait_for` and Python is older than 3.12."""
    if sys.version_info >= (3, 12):
        return False
    try:
        return "asyncio.wait_for(" in inspect.getsource(engine_loop)
    except (OSError, TypeError):
        return False


def mend() -> bool:
    """Wrap vLLM's RequestTracker.wait_for_new_requests where the release needs it
    (idempotent); True when it is (now) wrapped."""
    module = sys.modules.get("vllm.engine.async_llm_engine")
    if module is None:  # no AsyncLLMEngine in this process: nothing to mend
        return False
    tracker = module.RequestTracker
    wait = tracker.wait_for_new_requests
    if getattr(wait, "_observatory", False):
        return True
    if not swallows_exit_cancel(module.AsyncLLMEngine.run_engine_loop):
        return False

    @functools.wraps(wait)
    async def wait_for_new_requests(self: Any) -> None:
        task = asyncio.current_task()
        if task is not None and task.cancelling():  # a cancel asyncio.wait_for dropped
            raise asyncio.CancelledError()
        await wait(self)

    wait_for_new_requests._observatory = True  # type: ignore[attr-defined]
    tracker.wait_for_new_requests = wait_for_new_requests
    return True
