"""Print the cache key of the virtualenv for one vLLM extra of pyproject.toml.

The key hashes only what decides that venv's contents: requires-python, the base
dependencies, the `test` extra and the one vLLM extra. Editing another vLLM extra (or the
README, or anything else in pyproject.toml) therefore does not rebuild a 6.5 GB venv that
would come out the same. Used by .ci/run; run by hand to find a venv:
`python3.11 .ci/venv_key.py vllm063` -> `vllm063-<16 hex>`.
"""

import hashlib
import json
import sys
import tomllib
from pathlib import Path


def venv_key(extra: str, pyproject: Path = Path(__file__).parent.parent / "pyproject.toml") -> str:
    project = tomllib.loads(pyproject.read_text())["project"]
    extras = project["optional-dependencies"]
    if extra not in extras:
        raise SystemExit(f"venv_key: no extra {extra!r} in {pyproject}")
    content = [project["requires-python"], project["dependencies"], extras["test"], extras[extra]]
    override = pyproject.parent / "overrides" / f"{extra}.txt"
    if override.exists():  # .ci/venv passes it to uv as --override
        content.append(override.read_text())
    digest = hashlib.sha256(json.dumps(content).encode()).hexdigest()[:16]
    return f"{extra}-{digest}"


if __name__ == "__main__":
    print(venv_key(sys.argv[1]))
