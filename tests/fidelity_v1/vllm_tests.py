"""The installed V1 release's own test files, from its sdist, cached outside the clone.

The wheel carries no tests (`vllm/` only), and vLLM's tests are not ours to commit, so the
sdist of the installed release (SDISTS: the file and its sha256 as PyPI lists them) is fetched
once from the package index into `~/.cache/vllm-observatory/vllm-sdist-tests/<version>/`
(VLLM_OBSERVATORY_CACHE overrides the root), and only its `tests/` tree and `pyproject.toml`
(vLLM's pytest markers) are unpacked.
`pip download --no-binary :all: vllm==0.33.0` would fetch the same file but then builds its
metadata, which installs vLLM's build requirements (torch, cmake) first: minutes and gigabytes
for a 47 MB archive, so the index's URL is read directly.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import urllib.request
from pathlib import Path

SDISTS: dict[str, tuple[str, str]] = {
    "0.18.0": ("https://files.pythonhosted.org/packages/39/a9/"
               "ed48c497572a41552cc71b5ede15291d882c546a01df27ed42944eb3b3ad/vllm-0.18.0.tar.gz",
               "9a1bee091db8dbb4664a2a09cd9c61912e9912a44af1ce12b8593a231d05971c"),
    # version: (the sdist's URL, its sha256), as PyPI's simple index lists them
    "0.24.0": ("https://files.pythonhosted.org/packages/d4/17/"
               "ea541f9ffb31d438ed6a5a8e1f7b9805410664abf97e326f28416147a5da/vllm-0.24.0.tar.gz",
               "0862453adc1f3339f1a0c9dca1179c34d6ed6e118f87b6e5bddd120af614ac66"),
    "0.29.0": ("https://files.pythonhosted.org/packages/88/fe/"
               "d87b6daf7f02a16464b50685dcf8e0ee7c6e12ad4d2b7107c41717d8566c/vllm-0.29.0.tar.gz",
               "c03feb07943ecae9e69e7dc424d7c5569ecf8d1292513aef2a4de67af381cd97"),
    "0.33.0": ("https://files.pythonhosted.org/packages/f7/25/"
               "aa5684e9c59d6fc75f78926b7f15e8d9adc7de2d9e6e7575b80776ad8169/vllm-0.33.0.tar.gz",
               "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112"),
    "0.34.0": ("https://files.pythonhosted.org/packages/92/21/"
               "6e0b077dc4a0b28f5a8ce8bb352a38d7196650d681fd4faa87f8dc622eff/vllm-0.34.0.tar.gz",
               "fcad848b246a9d8652b47e6425af92334dc02492f9802720f54e27b823cf0113"),
}

LOADS_TOKENIZER = {"0.18.0"}
"""Releases whose test scheduler loads the model's tokenizer (its StructuredOutputManager): a
byte-level one is put beside opt-125m's config for them alone, so the others' bare outcomes
stay as committed."""


def _installed() -> str:
    """The installed vLLM's release (its version without a local part), or "" if none."""
    from engine.adapters.versions import installed_version

    return (installed_version() or "").split("+", 1)[0]


VERSION = _installed()
SDIST = f"vllm-{VERSION}.tar.gz"
URL, SHA256 = SDISTS.get(VERSION, ("", ""))
SCHEDULER_TESTS = "tests/v1/core/test_scheduler.py"


class Unavailable(Exception):
    """The sdist is neither cached nor downloadable (offline): callers skip, saying so."""


def cache_root() -> Path:
    base = os.environ.get("VLLM_OBSERVATORY_CACHE") or Path.home() / ".cache" / "vllm-observatory"
    return Path(base) / "vllm-sdist-tests" / VERSION


def _download(dest: Path) -> None:
    if not URL:
        raise Unavailable(f"no sdist is pinned for vLLM {VERSION or '(none installed)'} in "
                          f"tests/fidelity_v1/vllm_tests.py SDISTS "
                          f"(pinned: {', '.join(SDISTS)})")
    part = dest.with_suffix(".part")
    try:
        with urllib.request.urlopen(URL, timeout=120) as response, open(part, "wb") as out:
            shutil.copyfileobj(response, out)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise Unavailable(f"cannot download {SDIST} ({exc}); put it in {dest.parent}") from exc
    digest = hashlib.sha256(part.read_bytes()).hexdigest()
    if digest != SHA256:
        part.unlink()
        raise Unavailable(f"{SDIST}: sha256 {digest}, PyPI lists {SHA256}")
    part.replace(dest)


def hf_cache() -> Path:
    """A Hugging Face hub cache holding `facebook/opt-125m`'s config (the observatory's own
    copy, engine/adapters/models/opt-125m), for HF_HUB_OFFLINE runs: vLLM's scheduler tests
    build a ModelConfig of that repo id, which reads its config.json and nothing else. (The
    tests of multimodal and hybrid models name llava-hf/llava-1.5-7b-hf and
    Qwen/Qwen3-Next-80B-A3B-Instruct, whose configs are not here: they fail alike with and
    without the observatory.)"""
    repo = Path(__file__).resolve().parents[2]
    hub = cache_root() / "hf-hub"
    model = hub / "models--facebook--opt-125m"
    snapshot = model / "snapshots" / "observatory"
    snapshot.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(repo / "engine" / "adapters" / "models" / "opt-125m" / "config.json",
                    snapshot / "config.json")
    if VERSION in LOADS_TOKENIZER:
        _byte_tokenizer(snapshot)
    (model / "refs").mkdir(exist_ok=True)
    (model / "refs" / "main").write_text("observatory")
    return hub


def _byte_tokenizer(snapshot: Path) -> None:
    """A byte-level BPE tokenizer with no merges (vocab.json, merges.txt) beside the config:
    0.18's test scheduler loads the model's tokenizer (LOADS_TOKENIZER), and OPT's vocabulary
    cannot be fetched here. The tests give
    token ids, never text, so which vocabulary it is changes no scheduling decision."""
    import json

    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[byte] = chr(byte)
        else:
            chars[byte] = chr(256 + extra)
            extra += 1
    (snapshot / "vocab.json").write_text(json.dumps({chars[b]: b for b in range(256)}))
    (snapshot / "merges.txt").write_text("#version: 0.2\n")


def tests_root() -> Path:
    """The unpacked sdist root holding `tests/` and `pyproject.toml` (downloaded on first use)."""
    root = cache_root()
    unpacked = root / f"vllm-{VERSION}"
    if (unpacked / SCHEDULER_TESTS).exists():
        return unpacked
    root.mkdir(parents=True, exist_ok=True)
    archive = root / SDIST
    if not archive.exists():
        _download(archive)
    prefix = f"vllm-{VERSION}/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers()
                   if (m.name.startswith(prefix + "tests/") or m.name == prefix + "pyproject.toml")
                   and (m.isfile() or m.isdir())]
        tar.extractall(root, members=members, filter="data")
    return unpacked
