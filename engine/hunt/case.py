"""One hunted workload: the engine settings and the requests, as the run replays them.

The requests are Mooncake trace rows (the format `--trace` already replays): an arrival in
milliseconds, a prompt length, an output length and the 512-token blocks the prompt shares with
others (`hash_ids`). A case is therefore exactly what a user can run by hand: a trace file and
a config of RunSpec fields (`observatory run --config case.toml --trace trace.jsonl`). Every
RunSpec field the hunt sets is written out, `preemption_mode` included, so no preset default
can slip in between the hunt's run and the user's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from engine.spec import RunSpec

TRACE_NAME = "trace.jsonl"
CONFIG_NAME = "config.toml"


class Row(msgspec.Struct, frozen=True):
    """One request: Mooncake's fields."""

    timestamp: int  # ms from the trace's start
    input_length: int
    output_length: int
    hash_ids: list[int] = []


class Case(msgspec.Struct, kw_only=True):
    """A workload and its engine: `settings` are RunSpec fields (the trace ones aside)."""

    seed: int
    index: int  # the workload's number in its hunt
    settings: dict[str, Any]
    rows: list[Row]

    @property
    def policy(self) -> str:
        return str(self.settings.get("policy", "off"))

    @property
    def samples(self) -> int:
        return int(self.settings.get("trace_n", 1))

    def replace(self, settings: dict[str, Any] | None = None,
                rows: list[Row] | None = None) -> "Case":
        return Case(seed=self.seed, index=self.index,
                    settings=dict(self.settings if settings is None else settings),
                    rows=list(self.rows if rows is None else rows))

    def trace_text(self) -> str:
        return "".join(json.dumps(msgspec.to_builtins(row)) + "\n" for row in self.rows)

    def write_trace(self, directory: Path) -> Path:
        path = directory / TRACE_NAME
        path.write_text(self.trace_text())
        return path

    def spec(self, trace: Path, **extra: Any) -> RunSpec:
        """The RunSpec that replays this case from `trace` (its file, written)."""
        fields = {**self.settings, "trace": str(trace), "trace_format": "mooncake", **extra}
        return msgspec.convert(fields, RunSpec).validated()

    def config_fields(self) -> dict[str, Any]:
        """What the bundle's config holds: every setting, the trace by its file name."""
        return {**self.settings, "trace": TRACE_NAME, "trace_format": "mooncake"}


def encode(case: Case) -> bytes:
    return msgspec.json.encode(case)


def decode(data: bytes) -> Case:
    return msgspec.json.decode(data, type=Case)
