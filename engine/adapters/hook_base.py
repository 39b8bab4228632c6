"""What every engine kind's scheduler hook shares: turning our own exceptions into HookError,
and the thread-safe policy switch that applies at a step boundary.

Why here: the V0 and V1 hooks wrap different vLLM methods, but a policy asked for from the UI
thread must reach both the same way (never mid-step), and a bug in either must be reported as
the observatory's, not vLLM's.
"""

from __future__ import annotations

import threading

from engine.adapters.driver import HookError
from engine.policy import Policy, parse_policy


class OwnCode:
    """`with OwnCode("hook x"):` turns any exception from the block into a HookError.
    A plain class (not @contextmanager): it runs several times per step."""

    __slots__ = ("where",)

    def __init__(self, where: str) -> None:
        self.where = where

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> None:  # noqa: ANN001
        if exc is not None and isinstance(exc, Exception) and not isinstance(exc, HookError):
            raise HookError(self.where, exc) from exc


class PolicySwitch:
    """The policy in force, and the one asked for from another thread, applied by the hook at
    the start of the next step. `changes` lists (step, old, new, source) for PolicyChanged."""

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self._pending: tuple[Policy, str] | None = None
        self._lock = threading.Lock()
        self.steps_scheduled = 0
        self.changes: list[tuple[int, Policy, Policy, str]] = []

    @property
    def policy(self) -> Policy:
        return self._policy

    @property
    def has_pending(self) -> bool:
        """A policy was asked for and the hook has not taken it yet (it does at the next
        step's start)."""
        return self._pending is not None

    def require(self, policy: Policy) -> None:
        """Raise ConfigError (one line) if `policy` cannot act on the engine this hook
        watches; asked before a switch, in the asker's thread. Every rule of the engine's kind
        can, unless a hook says otherwise."""

    def set_policy(self, policy: str | Policy, source: str = "api") -> None:
        """Ask for `policy` from the next step on (any thread); one this engine cannot take
        (`require`) is refused here, in the asker's thread, never inside vLLM's step."""
        policy = parse_policy(policy)
        self.require(policy)
        self.switch(policy, source)

    def switch(self, policy: Policy, source: str) -> None:
        """`set_policy` for a policy its asker has already checked (a Session asks
        engine.policy once, with its spec's engine). Safe from any thread."""
        with self._lock:
            self._pending = (policy, source)

    def _apply_pending(self) -> bool:
        """Take the policy asked for, if any; True when the policy in force changed."""
        if self._pending is None:  # every step but a switch's: no lock (a plain read is atomic)
            return False
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None and pending[0] != self._policy:
            self.changes.append((self.steps_scheduled, self._policy, pending[0], pending[1]))
            self._policy = pending[0]
            return True
        return False
