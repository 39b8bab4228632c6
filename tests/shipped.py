"""The recordings the project ships, read through one function: where the list lives (today a
glob of recordings/*.jsonl.zst) is said here once, so moving it into a manifest is one line."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def shipped_recordings() -> list[Path]:
    """Every shipped recording, by name (the imported real log in recordings/reference/ is not
    a run the observatory made: no steps to compare)."""
    return sorted((ROOT / "recordings").glob("*.jsonl.zst"))
