"""Shared fixtures: real demo runs of the sim backend, made once per test session.

Every run here is the real vLLM 0.5.0.post1 engine and scheduler; only the model executor is the
sim one. A demo run takes about a second, so runs that several tests read are cached.
"""

from __future__ import annotations

from typing import Callable

import pytest

from engine.stream.records import Header, Record
from engine.session import Session
from engine.spec import RunSpec, preset_spec

Items = list[Header | Record]


def run_items(spec: RunSpec) -> Items:
    """Run `spec` to the end on this thread and return everything it emitted."""
    items: Items = []
    session = Session(spec.validated())
    session.subscribe(items.append)
    session.run()
    return items


@pytest.fixture(scope="session")
def demo_run() -> Callable[..., Items]:
    """demo_run(policy="off", **overrides) -> items, cached per argument set."""
    cache: dict[tuple, Items] = {}

    def get(policy: str = "off", **overrides) -> Items:
        key = (policy, repr(sorted(overrides.items())))
        if key not in cache:
            cache[key] = run_items(preset_spec("demo", policy=policy, **overrides))
        return cache[key]

    return get
