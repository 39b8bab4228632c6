"""GPU smoke test and figures, for whoever has a CUDA device; fully offline.

1. Builds a tiny random-weight OPT model (2 layers, hidden 128, 2 heads of 64, fp16) and a
   byte-level BPE tokenizer trained on the seed's own prompt source (vllm/core/scheduler.py),
   locally, with transformers and tokenizers: nothing is downloaded.
2. Runs a seed-shaped workload (the seed's prompts, n=8, chunked prefill, 4096 batched tokens,
   8192 GPU and 7281 CPU blocks; fewer requests) on the gpu backend for --steps steps, with
   the observatory attached (the Session, exactly as `observatory run` drives it) and bare
   (vLLM's own `LLMEngine.step()` loop on the same engine build and requests), in alternating
   pairs. Each arm runs in its own
   process, so every engine gets a fresh CUDA context and a freed GPU.
3. Prints the device, `exec_s` statistics (the CUDA-synchronised executor time per step) and
   the observer's overhead: median seconds per step observed / bare - 1, over the pairs.

Without CUDA it prints one "skipped" line and exits 0. The model builder (`build_tiny_opt`) runs
on any CPU; tests/test_gpu_backend.py builds one and drives it through the sim backend and
through the gpu backend's config path.

Run: python bench/gpu_smoke.py [--steps 200] [--pairs 3] [--requests 256] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>"]  # ids 0..3, as OPT's: pad 1, bos = eos 2
TINY = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "ffn_dim": 512}


def build_tiny_opt(dest: str | os.PathLike[str], *, vocab_size: int = 512, seed: int = 0) -> Path:
    """Write a random-weight OPT model and its tokenizer to `dest`; return the directory.

    Head size 64 is the smallest vLLM 0.5's paged attention supports; fp16 runs on every CUDA
    GPU (bf16 would not). The tokenizer is byte-level BPE, so any text encodes."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import OPTConfig, OPTForCausalLM, PreTrainedTokenizerFast

    from engine.workload import seed_long_text

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    text = seed_long_text()
    tokenizer.train_from_iterator((text[i:i + 2000] for i in range(0, len(text), 2000)), trainer)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="</s>",
                                      eos_token="</s>", unk_token="<unk>", pad_token="<pad>")
    wrapped.save_pretrained(dest)

    torch.manual_seed(seed)
    config = OPTConfig(vocab_size=tokenizer.get_vocab_size(), max_position_embeddings=2048,
                       word_embed_proj_dim=TINY["hidden_size"], bos_token_id=2, eos_token_id=2,
                       pad_token_id=1, torch_dtype="float16", **TINY)
    model = OPTForCausalLM(config).to(torch.float16)
    model.save_pretrained(dest, safe_serialization=True)
    return dest


SEED_CPU_BLOCKS = 7281  # the seed's count (4 GiB on OPT-125m): the tiny model gets the same


def smoke_spec(model_dir: str, steps: int, requests: int):
    """The seed's workload shape on the tiny model (seed-5578 with fewer requests), with the
    seed's block counts: 8192 GPU blocks and 7281 CPU blocks, the latter through the swap-space
    translation (a few hundred MB of pinned memory for this model, not 4 GiB)."""
    from engine.spec import preset_spec

    return preset_spec("seed-5578", backend="gpu", model=model_dir, tokenizer=model_dir,
                       requests=requests, max_steps=steps,
                       num_cpu_blocks=SEED_CPU_BLOCKS).validated()


# ---- one arm, in its own process -------------------------------------------------------------
def run_observed(spec) -> dict[str, Any]:
    import msgspec

    from engine.session import Session
    from engine.stream.records import StepRecord

    session = Session(spec)
    steps: list[StepRecord] = []
    session.subscribe(lambda item: steps.append(item) if isinstance(item, StepRecord) else None)
    session.run()
    assert session.header is not None
    walls = [s.wall_s for s in steps]
    return {"device": msgspec.to_builtins(session.header.device),
            "time_axis": session.header.time_axis,
            "loop_s": walls[-1] - walls[0], "steps": len(steps),
            "exec_s": [s.exec_s for s in steps],
            "generated": sum(s.generated_tokens for s in steps)}


def run_bare(spec) -> dict[str, Any]:
    """vLLM as its examples drive it: build, add every request, step() in a loop."""
    import gc

    from vllm import SamplingParams

    from engine.adapters.v0.build import build_engine
    from engine.workload import Workload

    built = build_engine(spec)
    engine = built.engine
    params = SamplingParams(n=spec.n, max_tokens=spec.max_tokens,
                            stop_token_ids=built.stop_token_ids)
    for request in Workload(spec, built.max_model_len, built.count_tokens).initial():
        engine.add_request(request.request_id, {"prompt": request.prompt_text}, params)
    gc.collect()
    gc.freeze()  # as the session does once its requests are in
    ends = []
    for _ in range(spec.max_steps):
        if not engine.has_unfinished_requests():
            break
        engine.step()
        ends.append(time.perf_counter())
    return {"loop_s": ends[-1] - ends[0], "steps": len(ends)}


def _arm(kind: str, model_dir: str, steps: int, requests: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, __file__, "--arm", kind, "--model", model_dir,
                          "--steps", str(steps), "--requests", str(requests)],
                         capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"gpu_smoke: the {kind} arm failed: {tail}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _ms(values: list[float]) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return (f"median {statistics.median(values) * 1e3:.3f} ms, p90 {p90 * 1e3:.3f} ms, "
            f"min {values[0] * 1e3:.3f} ms, max {values[-1] * 1e3:.3f} ms, "
            f"sum {sum(values):.3f} s over {len(values)} steps")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--keep", metavar="DIR", help="build the model here and keep it")
    parser.add_argument("--arm", choices=("observed", "bare"), help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    from engine.adapters.v0.build import cuda_available

    if not cuda_available():
        print("gpu_smoke: skipped: no CUDA device (torch.cuda.is_available() is False)")
        return 0
    if args.arm:
        from engine import logs

        logs.install()  # vLLM's lines stay out of the JSON on stdout
        spec = smoke_spec(args.model, args.steps, args.requests)
        result = run_observed(spec) if args.arm == "observed" else run_bare(spec)
        print(json.dumps(result))
        return 0

    with tempfile.TemporaryDirectory(prefix="gpu-smoke-") as tmp:
        model_dir = str(build_tiny_opt(args.keep or tmp))
        print(f"tiny OPT model and tokenizer: {model_dir}")
        observed, bare = [], []
        for pair in range(args.pairs):  # alternate, so drift hits both arms alike
            order = ("observed", "bare") if pair % 2 == 0 else ("bare", "observed")
            for kind in order:
                result = _arm(kind, model_dir, args.steps, args.requests)
                (observed if kind == "observed" else bare).append(result)
        first = observed[0]
        print(f"device: {first['device']}  time axis: {first['time_axis']}")
        print(f"exec_s (first observed run): {_ms(first['exec_s'])}")
        per_step_obs = [r["loop_s"] / max(1, r["steps"] - 1) for r in observed]
        per_step_bare = [r["loop_s"] / max(1, r["steps"] - 1) for r in bare]
        med_obs, med_bare = statistics.median(per_step_obs), statistics.median(per_step_bare)
        exec_med = statistics.median(statistics.median(r["exec_s"]) for r in observed)
        print(f"seconds per step, median of {args.pairs} alternating pairs: observed "
              f"{med_obs * 1e3:.3f} ms, bare {med_bare * 1e3:.3f} ms, observer overhead "
              f"{(med_obs / med_bare - 1) * 100:+.1f}%")
        print(f"executor share of an observed step: {exec_med / med_obs * 100:.0f}% "
              f"(median exec_s {exec_med * 1e3:.3f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
