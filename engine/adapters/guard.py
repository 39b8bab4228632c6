"""Make a hook that is attached to someone else's engine unable to harm it.

In the observatory's own runs a failing hook must end the run loudly (HookError becomes an
ObserverError record). In a user's engine (`observatory exec`, `engine.attach`) the opposite
holds: the engine must run on as if nothing were attached. `Guard.wrap` puts a guard around
each wrapper a hook installed on an instance: if the hook's own code raises, the guard finishes
the call the way vLLM would have, and from then on every guarded method is vLLM's own.

"The way vLLM would have": the guard knows whether vLLM's original method already ran inside
the hook's wrapper (the hook calls it through its `_originals` table, which the guard
instruments). If it ran, its result is returned as is (the hook failed while looking at it); if
not, the original is called now. An exception raised by vLLM's original passes through untouched:
that is the engine's own failure, not ours.
"""

from __future__ import annotations

from typing import Any, Callable

_PENDING, _RETURNED, _RAISED = 0, 1, 2


class Guard:
    """Guards for one hook's wrappers; `broken` once any of them failed."""

    def __init__(self, on_failure: Callable[[BaseException], None]) -> None:
        self.broken = False
        self._on_failure = on_failure

    def wrap(self, owner: Any, name: str, originals: dict[str, Callable[..., Any]],
             key: str | None = None) -> None:
        """Guard the wrapper installed as `owner.<name>`, whose vLLM original the hook calls
        as `originals[key or name]`."""
        key = key or name
        hooked = vars(owner)[name]
        inner = originals[key]
        calls: list[list[Any]] = []  # one [state, result] per guarded call in progress

        def original(*args: Any, **kwargs: Any) -> Any:
            try:
                result = inner(*args, **kwargs)
            except BaseException as exc:
                if calls:
                    calls[-1][:] = [_RAISED, exc]
                raise
            if calls:
                calls[-1][:] = [_RETURNED, result]
            return result

        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self.broken:
                return inner(*args, **kwargs)
            call = [_PENDING, None]
            calls.append(call)
            try:
                return hooked(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001
                state, value = call
                if state == _RAISED and value is exc:
                    raise  # vLLM's own exception: the engine's, passed through untouched
                self.fail(exc)
                if state == _RETURNED:
                    return value
                if state == _RAISED:
                    raise value  # noqa: B904  vLLM raised, then our code failed handling it
                return inner(*args, **kwargs)
            finally:
                calls.pop()

        originals[key] = original
        setattr(owner, name, guarded)

    def fail(self, exc: BaseException) -> None:
        """Our code failed: every guard passes straight through from now on."""
        if self.broken:
            return
        self.broken = True
        try:
            self._on_failure(exc)
        except Exception:  # noqa: BLE001  reporting must not fail the engine either
            pass
