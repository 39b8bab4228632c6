"""`observatory tiny-model DIR`: a tiny model directory made here, with nothing downloaded.

Why: `vllm serve DIR` (and the V0 OpenAI server) needs a model directory even when the
observatory's sim executor computes nothing: vLLM reads the config to size the KV cache, and the
server's tokenizer turns every prompt into token ids and every sampled id back into text. These
machines reach no model hub, so the directory is written from scratch:

- `config.json`: a Llama (default) or OPT architecture, 2 layers, hidden size 128 (2 heads of
  64: the head size every vLLM attention backend takes), a context of 4096 tokens (room for
  `vllm bench serve`'s default 1024 + 128);
- `tokenizer.json` + `tokenizer_config.json` + `special_tokens_map.json`: a byte-level BPE
  tokenizer (any text encodes) trained with the `tokenizers` library on the observatory's own
  source, with `<s>`, `<pad>`, `</s>`, `<unk>` and a chat template, so the OpenAI server's chat
  endpoint works. The files are written by hand, not by transformers' `save_pretrained`, so the
  same directory loads in every supported vLLM's transformers (newer ones would move the chat
  template to a file older ones do not read) and its merges use the string form every
  `tokenizers` release reads;
- `generation_config.json`;
- with `weights=True`, `model.safetensors`: random fp16 weights from transformers' own model
  class for that architecture (seeded), for a real forward pass on a GPU.

The directory is built beside DIR and renamed into place, so a failure leaves nothing half made.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, EngineError

ARCHS = ("llama", "opt")
SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>")  # ids 0..3
BOS_ID, PAD_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
HIDDEN, LAYERS, HEADS, FFN = 128, 2, 2, 512
CONTEXT = 4096
DEFAULT_VOCAB = 2048
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}")
"""Role-tagged turns, each ended by `</s>`: enough for vLLM's chat endpoint to render a prompt."""


@dataclass(frozen=True)
class TinyModel:
    """What was written: for the one line the command prints."""

    path: Path
    arch: str
    vocab_size: int
    weights_bytes: int  # 0 without weights

    def describe(self) -> str:
        weights = (f"random fp16 weights {self.weights_bytes / 2**20:.1f} MiB"
                   if self.weights_bytes else "no weights (sim executor only)")
        return (f"wrote a tiny {self.arch} model to {self.path}: {LAYERS} layers, hidden "
                f"{HIDDEN}, vocab {self.vocab_size}, context {CONTEXT}, {weights}")


def write_tiny_model(dest: str | os.PathLike[str], *, arch: str = "llama",
                     weights: bool = False, vocab_size: int = DEFAULT_VOCAB,
                     seed: int = 0) -> TinyModel:
    """Write the tiny model directory at `dest` (new, or an empty directory).

    ConfigError for a bad `dest` or `arch`; EngineError if `tokenizers` (or, with weights,
    torch and transformers) is missing."""
    if arch not in ARCHS:
        raise ConfigError(f"--arch {arch!r} is not known: use one of {', '.join(ARCHS)}")
    target = _check_destination(Path(dest))
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    except OSError as exc:
        raise ConfigError(f"cannot write in {target.parent}: {exc.strerror or exc}: "
                          f"give a directory you can write") from None
    try:
        vocab = _write_tokenizer(staging, vocab_size)
        config = _config(arch, vocab)
        _write_json(staging / "config.json", config)
        _write_json(staging / "generation_config.json", {
            "bos_token_id": config["bos_token_id"], "eos_token_id": EOS_ID,
            "pad_token_id": PAD_ID})
        size = _write_weights(staging, arch, seed) if weights else 0
        _set_modes(staging)
        if target.is_dir():
            target.rmdir()  # empty, checked above
        staging.rename(target)
    except OSError as exc:
        raise ConfigError(f"cannot write the model to {target}: {exc.strerror or exc}") from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return TinyModel(target, arch, vocab, size)


def _check_destination(dest: Path) -> Path:
    dest = dest.expanduser().absolute()
    if dest.is_symlink():  # a link to an empty directory: fill the directory, keep the link
        dest = dest.resolve()
    if dest.exists() and not dest.is_dir():
        raise ConfigError(f"{dest} exists and is not a directory: give a new directory")
    if dest.is_dir() and any(dest.iterdir()):
        raise ConfigError(f"{dest} is not empty: give a new or empty directory")
    if dest.parent.exists() and not dest.parent.is_dir():
        raise ConfigError(f"{dest.parent} is not a directory: give a path inside one")
    if not dest.parent.is_dir():
        raise ConfigError(f"{dest.parent} does not exist: create it first")
    if not os.access(dest.parent, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write in {dest.parent}: give a directory you can write")
    return dest


def training_text() -> list[str]:
    """The tokenizer's training text: the observatory's own Python source, in a fixed order, so
    one observatory version always trains the same tokenizer (no data set, no download)."""
    root = Path(__file__).resolve().parent
    return [p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.py"))]


def _write_tokenizer(dest: Path, vocab_size: int) -> int:
    """tokenizer.json, tokenizer_config.json, special_tokens_map.json; the vocabulary size."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        raise EngineError("tiny-model needs the `tokenizers` package (installed with vLLM and "
                          "transformers): pip install tokenizers") from None
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(training_text(), trainer)
    data = json.loads(tokenizer.to_str())
    merges = data["model"].get("merges", [])
    # tokenizers >= 0.20 writes a merge as a pair, older releases read only "a b" (byte-level
    # tokens hold no space, so the string form is exact)
    data["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in merges]
    _write_json(dest / "tokenizer.json", data)
    specials = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                "pad_token": "<pad>"}
    _write_json(dest / "special_tokens_map.json", specials)
    _write_json(dest / "tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": CONTEXT,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {
            str(i): {"content": tok, "lstrip": False, "normalized": False, "rstrip": False,
                     "single_word": False, "special": True}
            for i, tok in enumerate(SPECIAL_TOKENS)},
        **specials,
    })
    return tokenizer.get_vocab_size()


def _config(arch: str, vocab: int) -> dict[str, Any]:
    """The model's config.json, as transformers writes one for that architecture."""
    common = {"vocab_size": vocab, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
              "num_attention_heads": HEADS, "max_position_embeddings": CONTEXT,
              "pad_token_id": PAD_ID, "eos_token_id": EOS_ID, "torch_dtype": "float16"}
    if arch == "llama":
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                **common, "bos_token_id": BOS_ID, "num_key_value_heads": HEADS,
                "intermediate_size": FFN, "hidden_act": "silu", "rms_norm_eps": 1e-6,
                "rope_theta": 10000.0, "attention_bias": False, "tie_word_embeddings": False,
                "initializer_range": 0.02}
    return {"architectures": ["OPTForCausalLM"], "model_type": "opt", **common,
            "bos_token_id": EOS_ID,  # OPT starts and ends with </s>
            "ffn_dim": FFN, "word_embed_proj_dim": HIDDEN, "activation_function": "relu",
            "do_layer_norm_before": True, "enable_bias": True,
            "layer_norm_elementwise_affine": True, "dropout": 0.0, "attention_dropout": 0.0,
            "init_std": 0.02, "tie_word_embeddings": True}


def _write_weights(dest: Path, arch: str, seed: int) -> int:
    """model.safetensors: transformers' own model class for `arch`, seeded random init, fp16.
    A tied lm_head is left out, as transformers saves it. Returns the file's size."""
    try:
        import torch
        from safetensors.torch import save_file
        from transformers import AutoConfig, AutoModelForCausalLM
    except ImportError as exc:
        raise EngineError(f"tiny-model --weights needs torch, transformers and safetensors "
                          f"(installed with vLLM): {exc}") from None
    config = AutoConfig.from_pretrained(dest)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config).to(torch.float16)
    state = model.state_dict()
    if getattr(config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    path = dest / "model.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, str(path),
              metadata={"format": "pt"})
    return path.stat().st_size


def _set_modes(staging: Path) -> None:
    """mkdtemp makes a private directory (and safetensors a private file): give the directory
    and its files the modes the user's umask gives anything they make."""
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)
    for path in staging.iterdir():
        path.chmod(0o666 & ~umask)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
