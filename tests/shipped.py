"""The example recordings the observatory ships, as recordings/MANIFEST lists them: the only
files in recordings/ a test may read by pattern. A recording a user makes (written to runs/ by
default, or wherever --record says, recordings/ included) is never a test case, so the suite
counts the same tests on every machine.
"""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDINGS = ROOT / "recordings"
MANIFEST = RECORDINGS / "MANIFEST"


def manifest() -> dict[str, str]:
    """File name -> the vLLM extra that made it, in the manifest's order."""
    entries: dict[str, str] = {}
    for line in MANIFEST.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, extra = line.split()
            entries[name] = extra
    return entries


def shipped(pattern: str = "*") -> list[Path]:
    """The shipped recordings whose names match `pattern` (fnmatch), sorted by name."""
    return sorted(RECORDINGS / name for name in manifest() if fnmatch(name, pattern))


def shipped_recordings() -> list[Path]:
    """Every shipped recording, by name (the imported real log in recordings/reference/ is not
    a run the observatory made: no steps to compare)."""
    return shipped("*.jsonl.zst")
