"""Run settings declared once: each RunSpec (and CostModel) field carries its own `Setting`
(help, bounds, flag), and everything that reads a setting from a user is generated from it.

    num_gpu_blocks: Annotated[int, Setting("GPU KV-cache blocks", lo=1, hi=MAX_BLOCKS)] = 8192

is the whole declaration of `--num-gpu-blocks`: its argparse flag (`add_flags`), its key in a
`--config` TOML file (`load_config`), its sweep-grid spelling (`parse_setting`, used by
engine/sweep/grid.py), its checks on a spec built in code or read from a recording's header
(`check_struct`), and its help line all come from that one line. A value is either accepted
whole or refused with one line that names where it came from (a flag, `FILE: key`, a grid
value) and the allowed range; NaN and infinity are never accepted.

Cross-field rules (CPU blocks vs swap space, n vs max_num_seqs, the machine's memory) are in
RunSpec.validated(); this module only knows one value at a time, plus `check_block_memory`.

Imports run one way: spec.py, costmodel.py and output_lengths.py declare their fields with
`Setting` from here, and this module knows none of them; every function takes the Struct class
whose fields it reads (`load_config(RunSpec, path)`).
"""

from __future__ import annotations

import argparse
import math
import os
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import msgspec

from engine.errors import ConfigError

# A vLLM 0.5 block costs about 200 bytes of Python objects on the host whatever the model
# (measured: UncachedBlockAllocator with 1,000,000 blocks grew RSS by 202 MB); 256 leaves room
# for block tables. A block count whose objects would not fit in the machine's available memory
# is refused before vLLM starts building them (it takes ~3 s per million on a laptop CPU).
HOST_BYTES_PER_BLOCK = 256
MAX_BLOCKS = 10_000_000  # ~2.5 GB of block objects; far beyond any GPU's KV cache today
NULL_WORDS = ("none", "null")
TRUE_WORDS, FALSE_WORDS = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


@dataclass(frozen=True)
class Setting:
    """How a user gives one field: help, bounds and flag. Attached with typing.Annotated.

    `lo`/`hi` are inclusive unless `lo_open`/`hi_open`; floats must also be finite. `parse`
    turns text into the field's value for fields that are not plain scalars (toggles, cost),
    `check` adds a rule the bounds cannot say (a policy name), and `append` makes a repeatable
    flag whose parsed lists are concatenated.
    """

    help: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple[Any, ...] | None = None
    flag: str | None = None  # default: --field-name
    metavar: str | None = None
    parse: Callable[[str], Any] | None = None
    check: Callable[[Any], None] | None = None
    append: bool = False
    default_text: str | None = None  # what --help says the default is, where it is not the
    # field's value (the preset's depends on the installed vLLM)


@dataclass(frozen=True)
class Option:
    """One declared field of a Struct: its name, type, default and Setting."""

    name: str
    kind: Any  # int, float, str, bool, or the declared type for parse-only fields
    optional: bool  # None is a valid value ("not set": derived or unlimited)
    default: Any
    setting: Setting

    @property
    def flag(self) -> str:
        return self.setting.flag or "--" + self.name.replace("_", "-")

    def describe(self) -> str:
        """The allowed values in words, for errors and --help."""
        s = self.setting
        if s.choices is not None:
            return "one of " + ", ".join(str(c) for c in s.choices)
        what = {int: "an integer", float: "a number", str: "text", bool: "true or false"}.get(
            self.kind, "a value")
        if s.lo is not None and s.hi is not None and not s.lo_open and not s.hi_open:
            return f"{what} from {_num(s.lo)} to {_num(s.hi)}"
        parts = []
        if s.lo is not None:
            parts.append(f"{'>' if s.lo_open else '>='} {_num(s.lo)}")
        if s.hi is not None:
            parts.append(f"{'<' if s.hi_open else '<='} {_num(s.hi)}")
        return what + (" " + " and ".join(parts) if parts else "")


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) >= 10_000 else f"{x:g}"


def options(cls: type) -> dict[str, Option]:
    """The declared fields of a Struct class, in field order. Every field must be declared."""
    cached = _CACHE.get(cls)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(cls, include_extras=True)
    defaults = {f.name: f.default for f in msgspec.structs.fields(cls)}
    result: dict[str, Option] = {}
    for name in cls.__struct_fields__:
        hint = hints[name]
        meta = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Setting)]
        if len(meta) != 1:
            raise TypeError(f"{cls.__name__}.{name} needs exactly one Setting (engine.options)")
        base = hint.__origin__
        args = typing.get_args(base)
        optional = type(None) in args
        if optional:
            (base,) = [a for a in args if a is not type(None)]
        result[name] = Option(name, base, optional, defaults[name], meta[0])
    _CACHE[cls] = result
    return result


_CACHE: dict[type, dict[str, Option]] = {}


def lookup(cls: type, key: str) -> Option:
    """A field of `cls` by its name or its flag's spelling: `max_tokens`, `max-tokens`,
    `swap-space`."""
    table = options(cls)
    name = key.strip().lstrip("-").replace("-", "_")
    if name in table:
        return table[name]
    for option in table.values():
        if option.flag.lstrip("-").replace("-", "_") == name:
            return option
    raise KeyError(key)


# ---------------------------------------------------------------------- values
def check_value(option: Option, value: Any, where: str) -> Any:
    """Return `value` if it is allowed for `option`, else raise one line naming `where`."""
    s = option.setting
    if value is None:
        if option.optional:
            return None
        raise ConfigError(f"{where} must be {option.describe()}, got nothing (none)")
    if s.parse is None:  # a scalar: the type must match exactly (no bool for int)
        ok = (type(value) is option.kind
              or (option.kind is float and type(value) is int))
        if not ok:
            raise ConfigError(f"{where} must be {option.describe()}, got "
                              f"{type(value).__name__} {_show(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where} must be {option.describe()} (a finite number), got "
                          f"{_show(value)}")
    if s.choices is not None and value not in s.choices:
        raise ConfigError(f"{where} must be {option.describe()}, got {_show(value)}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        too_low = s.lo is not None and (value <= s.lo if s.lo_open else value < s.lo)
        too_high = s.hi is not None and (value >= s.hi if s.hi_open else value > s.hi)
        if too_low or too_high:
            raise ConfigError(f"{where} must be {option.describe()}, got {_show(value)}")
    if isinstance(value, str) and (not value or any(ord(c) < 32 or ord(c) == 127 for c in value)):
        raise ConfigError(f"{where} must be non-empty text without control characters, got "
                          f"{_show(value)}")
    if s.check is not None:
        try:
            s.check(value)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return value


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_text(option: Option, text: str, where: str, allow_none: bool = True) -> Any:
    """A value as a user typed it ("4", "1e-3", "none", "true") -> the field's value, checked."""
    raw = text.strip()
    if option.setting.parse is not None:
        value = _parse(option, raw, where)
    elif allow_none and option.optional and raw.lower() in NULL_WORDS:
        value = None
    elif option.kind is int:
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"{where} must be {option.describe()}, got {raw!r}") from None
    elif option.kind is float:
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"{where} must be {option.describe()}, got {raw!r}") from None
    elif option.kind is bool:
        if raw.lower() not in TRUE_WORDS + FALSE_WORDS:
            raise ConfigError(f"{where} must be true or false, got {raw!r}")
        value = raw.lower() in TRUE_WORDS
    else:
        value = raw
    return check_value(option, value, where)


def _parse(option: Option, text: str, where: str) -> Any:
    assert option.setting.parse is not None
    try:
        return option.setting.parse(text)
    except ConfigError as exc:
        message = str(exc)
        raise ConfigError(message if message.startswith(where) else f"{where}: {message}") \
            from None


def parse_setting(cls: type, name: str, text: str, where: str | None = None) -> Any:
    """One setting of `cls` from text (a sweep grid value): typed, bounded, one-line errors."""
    try:
        option = lookup(cls, name)
    except KeyError:
        raise ConfigError(f"{where or name}: not a {cls.__name__} field") from None
    return parse_text(option, text, where or option.flag)


def parse_items(cls: type, text: str, flag: str, unit: str) -> Any:
    """A table-valued flag, `--cost base_s=0.004,per_decode_seq_s=2e-5`, as a `cls` Struct:
    every key one of its declared fields, every value checked as `--config` checks it."""
    values: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, raw = item.partition("=")
        try:
            option = lookup(cls, key) if sep else None
        except KeyError:
            option = None
        if option is None:
            raise ConfigError(f"bad {flag} item {item!r}: use KEY={unit} with KEY one of "
                              f"{', '.join(cls.__struct_fields__)}")
        values[option.name] = parse_text(option, raw, f"{flag} {option.name}")
    return cls(**values)


def check_struct(obj: Any, where: Callable[[Option], str] | None = None) -> None:
    """Every declared field of `obj` within its bounds (specs built in code, headers)."""
    for option in options(type(obj)).values():
        check_value(option, getattr(obj, option.name),
                    where(option) if where else option.flag)


def fields_from_mapping(cls: type, data: Any, where: str) -> dict[str, Any]:
    """Checked field values from a decoded mapping (a TOML file, a recording's header): keys
    are field or flag names; an unknown key, a wrong type or an out-of-range value is one line
    naming `where` and the key."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a table of settings, got {type(data).__name__}")
    table = options(cls)
    fields: dict[str, Any] = {}
    for key, value in data.items():
        try:
            option = lookup(cls, str(key))
        except KeyError:
            raise ConfigError(f"{where}: unknown setting {_show(str(key))}; valid ones are "
                              f"{', '.join(table)}") from None
        place = f"{where}: {option.name}"
        if option.name in fields:
            raise ConfigError(f"{place} given twice")
        fields[option.name] = _typed(option, value, place)
    return fields


def from_mapping(cls: type, data: Any, where: str) -> Any:
    """A Struct from a decoded mapping, every value checked (see fields_from_mapping)."""
    return msgspec.convert(fields_from_mapping(cls, data, where), cls)


def _typed(option: Option, value: Any, where: str) -> Any:
    """A decoded value (TOML/JSON types) as the field's type, checked."""
    kind = option.kind
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct) and isinstance(value, dict):
        return from_mapping(kind, value, where)
    if option.setting.parse is not None:
        if isinstance(value, str):
            return check_value(option, _parse(option, value, where), where)
        try:
            value = msgspec.convert(value, kind)
        except msgspec.ValidationError as exc:
            detail = str(exc).replace("`", "").split(" - at ")[0]
            raise ConfigError(f"{where}: {detail[:1].lower()}{detail[1:]}") from None
    return check_value(option, value, where)


# ---------------------------------------------------------------------- files and flags
def load_config(cls: type, path: str) -> dict[str, Any]:
    """A `--config` TOML file as checked values of `cls`'s fields (keys as field or flag
    names)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        decoded = msgspec.toml.decode(data)
    except msgspec.DecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    return fields_from_mapping(cls, decoded, path)


def _flag_type(option: Option) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return parse_text(option, text, option.flag, allow_none=False)
        except ConfigError as exc:
            message = str(exc)  # argparse names the flag itself
            for prefix in (option.flag + ": ", option.flag + " "):
                while message.startswith(prefix):
                    message = message[len(prefix):]
            raise argparse.ArgumentTypeError(message) from None

    convert.__name__ = option.kind.__name__ if isinstance(option.kind, type) else "value"
    return convert


def bounded(kind: type, lo: float | None = None, hi: float | None = None,
            flag: str = "") -> Callable[[str], Any]:
    """An argparse `type=` for a flag that is not a RunSpec field (e.g. the TUI's --window):
    the same parsing, bounds and messages as the declared settings."""
    return _flag_type(Option("value", kind, False, None, Setting("", lo=lo, hi=hi, flag=flag)))


def add_flags(cls: type, group: Any) -> None:
    """One argparse flag per declared field of `cls`, dest = the field name, default None (not
    given), so a preset and a config file can supply values the flags then override."""
    for option in options(cls).values():
        s = option.setting
        default = option.default
        shown = "" if default is None or s.parse is not None else f" (default: {default})"
        if s.default_text is not None:
            shown = f" (default: {s.default_text})"
        if option.kind is bool:
            group.add_argument(option.flag, dest=option.name, default=None,
                               action=argparse.BooleanOptionalAction, help=s.help + shown)
            continue
        bounds = f"; {option.describe()}" if s.lo is not None or s.hi is not None else ""
        kwargs: dict[str, Any] = {"dest": option.name, "default": None,
                                  "help": s.help + bounds + shown, "type": _flag_type(option)}
        if s.append:
            kwargs["action"] = "append"
        metavar = s.metavar or (
            "{" + ",".join(str(c) for c in s.choices) + "}" if s.choices is not None
            else {int: "N", float: "X"}.get(option.kind))
        if metavar:
            kwargs["metavar"] = metavar
        group.add_argument(option.flag, **kwargs)


def values_from_args(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The flags the user gave, as field values (already checked by the flags' types)."""
    values: dict[str, Any] = {}
    for option in options(cls).values():
        value = getattr(args, option.name, None)
        if value is not None:
            values[option.name] = ([item for part in value for item in part]
                                   if option.setting.append else value)
    return values


# ---------------------------------------------------------------------- the machine
def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (Linux), else physical memory, else None (unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_block_memory(gpu_blocks: int, cpu_blocks: int, available: int | None = None) -> None:
    """Refuse block counts whose bookkeeping alone would not fit in this machine's memory."""
    available = available_memory_bytes() if available is None else available
    need = (gpu_blocks + cpu_blocks) * HOST_BYTES_PER_BLOCK
    if available is not None and need > available:
        raise ConfigError(
            f"{gpu_blocks:,} GPU + {cpu_blocks:,} CPU blocks need about {need / 2**30:.1f} GiB "
            f"of host memory for vLLM's block objects ({HOST_BYTES_PER_BLOCK} bytes each) and "
            f"this machine has {available / 2**30:.1f} GiB available: use fewer blocks")


def iter_flags(cls: type) -> Iterator[tuple[str, str]]:
    """(field, flag) pairs, for docs and tests."""
    for option in options(cls).values():
        yield option.name, option.flag
