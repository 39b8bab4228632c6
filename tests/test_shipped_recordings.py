"""The shipped recordings are a list, not a folder: recordings/MANIFEST names each example
make_examples.py makes (and the release that makes it), each is in the checkout, and the
tests that read them by pattern read the manifest (tests/shipped.py), so a user's recording in
recordings/ adds no test case."""

from __future__ import annotations

import ast
import importlib.util

from shipped import RECORDINGS, ROOT, manifest, shipped


def _make_examples():
    spec = importlib.util.spec_from_file_location("make_examples",
                                                  RECORDINGS / "make_examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_manifest_lists_every_example_make_examples_makes() -> None:
    made = {f"{name}.jsonl.zst": extra
            for name, (extra, _) in _make_examples().every_example().items()}
    assert manifest() == made
    missing = [name for name in made if not (RECORDINGS / name).is_file()]
    assert missing == []
    assert shipped("v1-thrash-*") == sorted(RECORDINGS / n for n in made
                                            if n.startswith("v1-thrash-"))


def test_no_test_globs_the_recordings_folder() -> None:
    """A test reads a shipped recording by its name or through the manifest, never by listing
    recordings/ (where a user's own runs may be)."""
    offenders = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("glob", "rglob", "iterdir") \
                    and "recordings" in ast.unparse(node.func.value):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
