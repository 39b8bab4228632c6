"""Why the waiting wait: a V1 step record's admission reason, in words.

A V1 step record carries the first reason vLLM's scan turned down the request it takes first
next step (`head_reason`, read by engine.adapters.v1.hooks from vLLM's own control flow) with
what that reason measured (`head_need`, `head_limit`), and vLLM's own
`num_requests_waiting_by_reason` counts (`waiting_by_reason`). This module only words them,
for the step detail, the stall line and the summary: one place, so every surface says the
same thing.
"""

from __future__ import annotations

from typing import Any

from engine.analysis.seats import scheduled_count

REASONS: dict[str, str] = {
    "preempted": "a step that preempted (vLLM admits no one then)",
    "token_budget": "the token budget",
    "seats": "seats",
    "active_seats": "seats",
    "kv_load": "its async KV load",
    "grammar": "its grammar (FSM)",
    "streaming": "more streaming input",
    "kv_blocks": "KV blocks",
    "policy": "the observatory's policy",
    "other": "another of vLLM's checks (LoRA, encoder, connector, order)",
}
"""Each `head_reason` the hooks record, as the words after "waits for"."""


def reason_text(s: Any) -> str:
    """What the head waiting request of step record `s` waits for ("" when the record says
    nothing: no one waits, a V0 record, or a recording made before reasons were kept)."""
    reason = getattr(s, "head_reason", None)
    if not reason:
        return ""
    words = REASONS.get(reason, reason)
    need, limit = s.head_need or 0, s.head_limit or 0
    if reason == "seats":
        scheduled = _scheduled(s)
        if scheduled is not None and scheduled < need:  # #45257: seats held by finals
            return f"{words} (max_num_seqs {limit:,} reached, {scheduled:,} scheduled)"
        return f"{words} (max_num_seqs {limit:,} reached)"
    if reason == "active_seats":
        return f"{words} (max_num_active_seqs {limit:,} reached)"
    if reason == "token_budget":
        return f"{words} ({need:,} of {limit:,} tokens scheduled)"
    if reason == "kv_blocks":
        return f"{words} (needs {need:,}, {limit:,} free)"
    if reason == "policy":
        return f"{words} ({s.policy})"
    return words


def _scheduled(s: Any) -> int | None:
    """Requests step record `s` scheduled (engine.analysis.seats), None for a record that does
    not list them."""
    try:
        return scheduled_count(s)
    except (AttributeError, TypeError):
        return None


def counts_text(s: Any) -> str:
    """vLLM's own waiting-by-reason counts of step record `s` ("capacity 3, deferred 2"), or
    "" when the release (or the recording) has none."""
    counts = getattr(s, "waiting_by_reason", None)
    if not counts:
        return ""
    return ", ".join(f"{name} {n:,}" for name, n in counts.items())
