"""A minimal TOML writer for `sweep.toml`: msgspec reads TOML with the standard library but
writing needs tomli_w, which vLLM's install does not bring. The sweep spec holds only strings,
numbers, booleans, lists, tables and arrays of tables, which is all this writes.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(name: str) -> str:
    return name if _BARE_KEY.match(name) else json.dumps(name)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON string escapes are TOML's too
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items() if v is not None)
        return "{" + items + "}"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def dumps(data: dict[str, Any], _prefix: str = "") -> str:
    """`data` as TOML. None values are left out (TOML has no null; readers use the default)."""
    lines: list[str] = []
    tables: list[tuple[str, Any]] = []
    for name, value in data.items():
        if value is None:
            continue
        if isinstance(value, dict) or _is_table_array(value):
            tables.append((name, value))
        else:
            lines.append(f"{_key(name)} = {_value(value)}")
    for name, value in tables:
        path = f"{_prefix}{_key(name)}"
        if isinstance(value, dict):
            lines += ["", f"[{path}]", dumps(value, path + ".")]
        else:
            for entry in value:
                lines += ["", f"[[{path}]]", dumps(entry, path + ".")]
    text = "\n".join(lines).strip("\n")
    return text if _prefix else text + "\n"
