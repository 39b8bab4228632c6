"""The sweep's grid: `--grid KEY=V1,V2,...` axes over RunSpec fields, expanded into cells.

Values stay as the user typed them (that is what `sweep.toml` keeps, so a resumed sweep parses
them exactly as the first run did) and are converted to each field's type by one function,
`convert_value`, which is engine.options' parser for flags and config files too.

A cell's identity is a hash of its whole RunSpec: `--resume` skips a cell whose hash already has
a row, so a cell is never confused with another even if the grid is written in another order.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

import msgspec

from engine.errors import ConfigError
from engine.options import check_value, lookup, parse_setting
from engine.policy import parse_policy
from engine.spec import RunSpec

MAX_SEEDS = 1_000_000  # the axis is built before --max-cells is checked: keep it cheap

# Fields that cannot be an axis, and why (the error says it).
NOT_GRIDDABLE = {
    "preset": "a preset is the base of the whole sweep: run one sweep per preset (--preset)",
    "toggles": "toggles are a list; give --toggle-at for every cell instead",
    "cost": "the cost model is a table; give --cost K=V,... for every cell instead",
    "lengths": "the output-length model is a table; give --lengths K=V,... for every cell "
               "instead",
}


class Axis(msgspec.Struct, frozen=True):
    """One `--grid` key: the RunSpec field, its values as typed, and converted."""

    key: str
    texts: tuple[str, ...]
    values: tuple[Any, ...]


class Cell(msgspec.Struct, frozen=True):
    """One point of the grid: its position, its identity, and the spec it runs."""

    index: int  # position in grid order (first axis slowest)
    key: str  # hash of the spec; what --resume matches rows by
    params: dict[str, Any]  # grid key -> value, in axis order
    spec: RunSpec


def field_name(key: str) -> str:
    """A grid key as a RunSpec field name: `max-tokens`, `max_tokens` and `swap-space` (the
    flag's spelling) all work."""
    try:
        name = lookup(RunSpec, key).name
    except KeyError:
        name = None
    if name in NOT_GRIDDABLE:
        raise ConfigError(f"--grid {key}: {NOT_GRIDDABLE[name]}")
    if name is None:
        valid = ", ".join(f for f in RunSpec.__struct_fields__ if f not in NOT_GRIDDABLE)
        raise ConfigError(f"--grid {key}: not a RunSpec field; use one of {valid}")
    return name


def convert_value(field: str, text: str) -> Any:
    """One grid value, typed and bounded as RunSpec declares `field` ("4" -> 4, "none" ->
    None): engine.options.parse_setting, the same parser as the flags and config files."""
    return parse_setting(RunSpec, field, text, f"--grid {field}={text.strip()}")


def parse_axis(text: str) -> Axis:
    """`KEY=V1,V2,...` -> Axis; one-line ConfigError for anything malformed."""
    key, sep, values = text.partition("=")
    if not sep or not key.strip() or not values.strip():
        raise ConfigError(f"malformed --grid {text!r}: use KEY=V1,V2,... e.g. n=2,4,8 or "
                          f"policy=off,strict,watermark:0.5")
    return make_axis(key, values.split(","))


def make_axis(key: str, texts: list[str]) -> Axis:
    """An axis from a key and its values as typed (from --grid, or from sweep.toml)."""
    name = field_name(key)
    stripped = tuple(t.strip() for t in texts)
    if not stripped or any(not t for t in stripped):
        raise ConfigError(f"--grid {name}: empty value (two commas in a row, or a trailing one)")
    converted = tuple(convert_value(name, t) for t in stripped)
    canonical = [str(parse_policy(v)) if name == "policy" else v for v in converted]
    duplicates = sorted({t for t, c in zip(stripped, canonical) if canonical.count(c) > 1})
    if duplicates:
        raise ConfigError(f"--grid {name}: value(s) {', '.join(duplicates)} given twice")
    return Axis(key=name, texts=stripped, values=converted)


def build_axes(grid: list[str], seeds: int | None, base: RunSpec) -> list[Axis]:
    """All axes in the order given, `--seeds N` last (seeds base.seed .. base.seed+N-1)."""
    axes = [parse_axis(text) for text in grid]
    names = [a.key for a in axes]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"--grid {repeated[0]} given twice: put all its values in one --grid")
    if seeds is not None:
        if not 1 <= seeds <= MAX_SEEDS:
            raise ConfigError(f"--seeds must be from 1 to {MAX_SEEDS:,}, got {seeds}")
        check_value(lookup(RunSpec, "seed"), base.seed + seeds - 1,
                    f"--seeds {seeds}: the last seed")
        if "seed" in names:
            raise ConfigError("give --seeds N or --grid seed=..., not both")
        texts = tuple(str(base.seed + i) for i in range(seeds))
        axes.append(Axis(key="seed", texts=texts, values=tuple(int(t) for t in texts)))
    if "num_cpu_blocks" in names and "swap_space_gib" in names:
        raise ConfigError("grid num_cpu_blocks or swap_space, not both: on the sim backend CPU "
                          "blocks override the swap space")
    return axes


def cell_count(axes: list[Axis]) -> int:
    count = 1
    for axis in axes:
        count *= len(axis.values)
    return count


def cell_key(spec: RunSpec) -> str:
    """A stable hash of everything that determines the cell's run.

    Only fields that differ from RunSpec's defaults go in, so a field added to RunSpec later
    (with a default) leaves the keys of existing sweeps, and so --resume, as they were.
    """
    defaults = msgspec.to_builtins(RunSpec())
    fields = {name: value for name, value in msgspec.to_builtins(spec).items()
              if name not in defaults or value != defaults[name]}
    return hashlib.sha256(msgspec.json.encode(fields)).hexdigest()[:16]


def expand(base: RunSpec, axes: list[Axis]) -> list[Cell]:
    """The cartesian product in grid order; each cell's spec is validated here, before Ray
    starts, so a value our own checks reject is a usage error rather than a failed cell."""
    cells: list[Cell] = []
    keys = [a.key for a in axes]
    for index, combo in enumerate(itertools.product(*(a.values for a in axes))):
        params = dict(zip(keys, combo))
        spec = msgspec.structs.replace(base, **params)
        try:
            spec.validated()
        except ConfigError as exc:
            where = ", ".join(f"{k}={v}" for k, v in params.items())
            raise ConfigError(f"cell {where}: {exc}") from None
        cells.append(Cell(index=index, key=cell_key(spec), params=params, spec=spec))
    return cells
