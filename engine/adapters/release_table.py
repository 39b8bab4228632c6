"""The one table of vLLM releases: which family each resolves to, or why it is refused.

`engine/adapters/releases.json` holds a row per vLLM release from 0.5.0 to the newest the
observatory knows. A row either resolves to an adapter family, with the date a bench earned it
and that bench's figures (bench/v1_releases.py for V1, bench/v0_releases.py for V0: the release
installed in its own venv, its preset under `off` and the fix, then `verify`), or names in one
line what is missing. engine.adapters.versions builds its Release rows from it, `observatory
versions` prints it and docs/versions.md is generated from it (docs/hooks/reference.py), so
one file says it everywhere. The benches write their rows back (`--write`).

Read into typed rows, so a hand edit that breaks the schema fails on load, in every command,
with the row it broke.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

PATH = Path(__file__).with_name("releases.json")


@dataclass
class Bench:
    """What the bench measured when it earned a release its family (one run each)."""

    preset: str  # "v1-thrash" (V1) or "seed-5578" (V0)
    steps: int  # the steps each run was given
    fix: str  # the policy that fixes the preset's bug: "whole-context" (V1), "reserve" (V0)
    # V1: the most preemptions of one request under `off` and under the fix
    off_max_preemptions: int | None = None
    fix_max_preemptions: int | None = None
    # V0: the step vLLM aborted at under `off`; under the fix, the steps run without an abort
    off_abort_step: int | None = None
    fix_steps: int | None = None
    verify: str = "ok"  # `observatory verify` on the `off` recording
    install_s: float | None = None  # the install's seconds (0: the venv was reused)
    load: float | None = None  # the machine's 1-minute load average as the bench began


@dataclass
class Row:
    version: str  # vllm.__version__ without a local "+..." part
    engine: str  # "v0" (LLMEngine) or "v1" (EngineCore)
    family: str = ""  # engine.adapters.<engine>.family_<family>; "" when refused
    refused: str = ""  # why it is refused, in one line (what is missing); "" when it resolves
    extra: str = ""  # the pyproject extra of a CI line ("" : no CI line runs it)
    pins: list[str] = field(default_factory=list)  # its install's companions (V0's)
    override: bool = False  # its install needs overrides/<extra>.txt (uv --override)
    sim_plugin: bool = False  # its V1 sim runs on the observatory's platform (v1/platform.py)
    earned: str = ""  # the date (YYYY-MM-DD) the bench last earned it its family
    bench: Bench | None = None  # the figures of that run


def _typed(cls: type, data: dict, where: str) -> object:
    """`cls(**data)`, refusing a key the schema does not have (a typo is not silently kept)."""
    names = {f.name for f in fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"{where}: unknown field {sorted(unknown)[0]!r}")
    return cls(**data)


def load(path: Path = PATH) -> list[Row]:
    """Every row of the table. Plain json and dataclasses: the benches run it on a bare
    python3.11, before any venv exists."""
    try:
        rows = []
        for data in json.loads(path.read_text())["releases"]:
            where = f"release {data.get('version', '?')}"
            bench = data.pop("bench", None)
            row = _typed(Row, data, where)
            if bench is not None:
                row.bench = _typed(Bench, bench, where)
            if bool(row.family) == bool(row.refused):
                raise ValueError(f"{where}: needs a family or a refusal (not both)")
            rows.append(row)
        return rows
    except (OSError, ValueError, KeyError, TypeError) as exc:
        # a broken table is a broken checkout: say which file, once
        raise SystemExit(f"observatory: error: {path}: {exc}") from None


def numbers(version: str) -> tuple[int, ...]:
    """`0.6.3.post1` -> (0, 6, 3, 1): enough order to sort releases."""
    parts = []
    for piece in version.split("+", 1)[0].replace("post", "").replace("rc", ".").split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def save(rows: list[Row], path: Path = PATH) -> None:
    """Write the table back, sorted by version, one row per line (diffs stay one line each)."""
    ordered = sorted(rows, key=lambda r: numbers(r.version) + (0,) * (4 - len(numbers(r.version))))
    lines = [json.dumps(_compact(asdict(row)), separators=(",", ":")) for row in ordered]
    path.write_text('{"releases": [\n' + ",\n".join(lines) + "\n]}\n")


def _compact(data: dict) -> dict:
    """A row without the fields at their defaults (each line says only what it has)."""
    defaults = {f.name: (f.default_factory() if callable(f.default_factory) else f.default)
                for f in fields(Row)}
    out = {k: v for k, v in data.items() if k in ("version", "engine") or v != defaults[k]}
    if out.get("bench"):
        out["bench"] = {k: v for k, v in out["bench"].items() if v is not None}
    return out


def upsert(row: Row, path: Path = PATH) -> None:
    """Replace (or add) `row`'s release in the table file."""
    rows = [r for r in load(path) if r.version != row.version]
    save(rows + [row], path)
