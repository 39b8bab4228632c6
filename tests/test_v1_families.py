"""Every V1 family module answers the whole interface the V1 modules read through
engine.adapters.v1.current (`fam`), and every tier module the tier's: a family that lacks a name
fails here, in every venv, not in the one release's CI line that imports it. Read from the
source (no vLLM needed): the interface is family_v033's public names, the reference family."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from engine.adapters.versions import SUPPORTED

V1 = Path(__file__).resolve().parent.parent / "engine" / "adapters" / "v1"
_HELPERS = {"annotations", "attrgetter", "Any", "Callable", "Iterator", "RunSpec"}


def _top_level_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _interface(path: Path) -> set[str]:
    return {n for n in _top_level_names(path) if not n.startswith("_")} - _HELPERS


def _protocol_members() -> set[str]:
    """The members engine.adapters.v1.family.V1Family declares (its attributes and methods)."""
    tree = ast.parse((V1 / "family.py").read_text())
    protocol = next(node for node in tree.body
                    if isinstance(node, ast.ClassDef) and node.name == "V1Family")
    return {node.target.id if isinstance(node, ast.AnnAssign) else node.name
            for node in protocol.body
            if isinstance(node, ast.FunctionDef)
            or isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}


def test_the_protocol_declares_the_reference_familys_whole_interface():
    assert _protocol_members() == _interface(V1 / "family_v033.py")


FAMILIES = sorted({r.family for r in SUPPORTED if r.engine == "v1"})


@pytest.mark.parametrize("family", FAMILIES)
def test_a_v1_family_answers_every_name_of_the_interface(family):
    path = V1 / f"family_{family}.py"
    assert path.exists(), f"{path.name}: the family a Release row names"
    missing = _protocol_members() - _top_level_names(path)
    assert not missing, f"{path.name} lacks {sorted(missing)}"


@pytest.mark.parametrize("module", sorted(p.stem for p in V1.glob("family_*.py"))
                         + sorted(p.stem for p in V1.glob("tier_v*.py")))
def test_what_a_family_takes_from_another_exists_there(module):
    """A name imported from another family module must be defined there (a family that
    renames or drops one breaks every family that borrowed it, on lines CI runs later)."""
    for node in ast.parse((V1 / f"{module}.py").read_text()).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "engine.adapters.v1.family_") or isinstance(node, ast.ImportFrom) and (
                node.module or "").startswith("engine.adapters.v1.tier_v"):
            source = V1 / f"{node.module.rsplit('.', 1)[1]}.py"
            missing = {a.name for a in node.names} - _top_level_names(source)
            assert not missing, f"{module} imports {sorted(missing)} from {source.name}"


@pytest.mark.parametrize("family", FAMILIES)
def test_a_v1_familys_tier_module_exists_and_refuses_or_answers(family):
    tree = ast.parse((V1 / f"family_{family}.py").read_text())
    tiers = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == "TIER" for t in node.targets)]
    if not tiers:  # imported from another family
        assert "TIER" in _top_level_names(V1 / f"family_{family}.py")
        return
    path = V1 / f"{tiers[0]}.py"
    assert path.exists(), f"family_{family}.TIER names {path.name}, which does not exist"
    names = _top_level_names(path)
    if "REFUSAL" in names:  # a release whose tier the sim cannot play refuses it in one line
        assert {"engine_kwargs", "is_offloading"} <= names
        return
    missing = _interface(V1 / "tier_v033.py") - names
    assert not missing, f"{path.name} lacks {sorted(missing)}"


@pytest.mark.parametrize("module", sorted(p.stem for p in V1.glob("family_*.py"))
                         + sorted(p.stem for p in V1.glob("tier_v*.py")) + ["current"])
def test_a_family_imports_no_vllm_module_at_its_top(module):
    """engine.adapters.v1.current imports the family before a sim engine sets vLLM's platform
    (a test module asks the tier at collection, the CLI asks before building): a vLLM import at
    a family's top level can resolve the platform too early (vllm.v1.outputs did on 0.34), so
    every vLLM name is imported where it is used."""
    for node in ast.parse((V1 / f"{module}.py").read_text()).body:
        if isinstance(node, ast.ImportFrom):
            assert not (node.module or "").startswith("vllm"), f"{module}: from {node.module}"
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("vllm") for a in node.names), module
