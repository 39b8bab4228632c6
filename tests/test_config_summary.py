"""The engine config a recording's header carries is always encodable: vLLM 0.33 keeps the
model revision as huggingface_hub's ResolvedRevision, a str subclass msgspec refuses, and
engine.attach raised inside vLLM's Scheduler.__init__ on it (found by vLLM's own scheduler
tests with the observatory attached, tests/fidelity_v1/)."""

from __future__ import annotations

from types import SimpleNamespace

import msgspec

from engine.adapters.build_shared import summarize_config


class Revision(str):
    """Like huggingface_hub._revision.ResolvedRevision: a str subclass."""


def test_a_str_subclass_is_stored_as_its_text() -> None:
    config = SimpleNamespace(model_config=SimpleNamespace(revision=Revision("main"), seed=3,
                                                          dtype=object()))
    summary = summarize_config(config)
    assert type(summary["model"]["revision"]) is str and summary["model"]["revision"] == "main"
    assert summary["model"]["seed"] == 3
    msgspec.json.encode(summary)  # raised TypeError before
