"""`observatory tiny-model DIR`: a model directory made offline that transformers (and so vLLM's
servers) load as it would a downloaded one, and bad destinations as one line, exit 2.

Marked every_vllm: each supported vLLM pins its own transformers and tokenizers, and the
directory must load in all of them (the V1 servers' tests use it in the vllm033 venv).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.every_vllm

ROOT = Path(__file__).resolve().parents[1]


def tiny_model(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui.cli", "tiny-model", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("arch", ["llama", "opt"])
def test_the_directory_loads_in_transformers(tmp_path, arch):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    dest = tmp_path / "model"
    result = tiny_model(str(dest), "--arch", arch, "--weights")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"wrote a tiny {arch} model to {dest}")
    config = AutoConfig.from_pretrained(dest)
    assert config.model_type == arch and config.max_position_embeddings >= 1024 + 128
    tokenizer = AutoTokenizer.from_pretrained(dest)
    text = "def step(self):\n    return [ü, '✓']  # any text"
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.decode(ids) == text  # byte-level: every string round-trips
    assert max(ids) < config.vocab_size == len(tokenizer)
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("</s>", "<pad>")
    assert tokenizer.eos_token_id == config.eos_token_id
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                           add_generation_prompt=True)
    assert prompt == "<|user|>\nhi</s>\n<|assistant|>\n"
    generation = json.loads((dest / "generation_config.json").read_text())
    assert generation["eos_token_id"] == config.eos_token_id
    model, info = AutoModelForCausalLM.from_pretrained(dest, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert model.config.vocab_size == len(tokenizer)


def test_without_weights_there_is_no_weight_file(tmp_path):
    dest = tmp_path / "empty-but-there"
    dest.mkdir()  # an empty directory is fine
    result = tiny_model(str(dest))
    assert result.returncode == 0, result.stderr
    assert "no weights" in result.stdout
    assert sorted(p.name for p in dest.iterdir()) == [
        "config.json", "generation_config.json", "special_tokens_map.json", "tokenizer.json",
        "tokenizer_config.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["empty-but-there"]  # no staging left


@pytest.mark.parametrize("where, message", [
    ("full", "is not empty: give a new or empty directory"),
    ("file", "exists and is not a directory"),
    ("under-file", "is not a directory: give a path inside one"),
    ("missing-parent", "does not exist: create it first"),
    ("proc", "cannot write in /proc"),
])
def test_bad_destinations_are_one_line_and_exit_2(tmp_path, where, message):
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    afile = tmp_path / "file"
    afile.write_text("x")
    dest = {"full": full, "file": afile, "under-file": afile / "model",
            "missing-parent": tmp_path / "no" / "model", "proc": Path("/proc/tiny-model")}[where]
    result = tiny_model(str(dest))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("observatory: error: ") and message in lines[0]
    assert (full / "keep.txt").read_text() == "mine"  # nothing of the user's touched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "full"]
