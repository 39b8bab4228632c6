"""The sample traces under tests/fixtures/traces/ and a plain reading of them (json and csv
from the standard library), which the trace readers' results are checked against."""

from __future__ import annotations

import csv
import json
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "traces"


def plain(name: str) -> list[tuple[int, int]]:
    """(input, output) of each request of a fixture, read with json/csv directly."""
    path = FIXTURES / name
    if name.endswith(".jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [(r["input_length"], r["output_length"]) for r in rows]
    if name.endswith(".json"):
        data = json.loads(path.read_text())
        return list(zip(data["input_lens"], data["output_lens"]))
    rows = list(csv.DictReader(path.open(newline="")))
    if "ContextTokens" in rows[0]:
        return [(int(r["ContextTokens"]), int(r["GeneratedTokens"])) for r in rows]
    return [(int(r["Request tokens"]), int(r["Response tokens"])) for r in rows]
