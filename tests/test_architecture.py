"""Structural rules the code base keeps (Harlequin style: a test, not a convention)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_engine_never_imports_the_ui():
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in imported_modules(p)
                                                  if m.split(".")[0] in ("textual", "tui",
                                                                          "textual_plotext"))
                 for p in (ROOT / "engine").rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_tui_reaches_vllm_only_through_the_engine():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "tui").rglob("*.py")
                 if any(m.split(".")[0] == "vllm" for m in imported_modules(p))]
    assert offenders == []


VLLM_PRIVATE = re.compile(r"\._(schedule\w*|preempt\w*|swap_\w+|get_stats|can_append_slots|"
                          r"append_slots|get_num_new_tokens|allocate_and_set_running)\b")


def test_only_the_adapters_know_vllms_private_names():
    hits = {}
    for path in list((ROOT / "engine").rglob("*.py")) + list((ROOT / "tui").rglob("*.py")):
        if "adapters" in path.relative_to(ROOT).parts:
            continue
        found = VLLM_PRIVATE.findall(path.read_text())
        if found:
            hits[str(path.relative_to(ROOT))] = found
    assert hits == {}
    assert VLLM_PRIVATE.search((ROOT / "engine" / "adapters" / "v0" / "hooks.py").read_text())
