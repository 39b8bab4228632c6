"""The one command for a GPU host: build the gpu engine, run the seed to its abort, check it
against the sim, print the measured step times. Fully offline.

1. The model: a local directory given with --model (weights, config and tokenizer), or else
   the packaged opt-125m config (engine/adapters/models/opt-125m) with random fp16 weights and
   a byte-level BPE tokenizer trained on the seed's own prompt source, written locally with
   transformers and tokenizers. HF_HUB_OFFLINE is set before anything imports huggingface, so
   nothing is downloaded; vLLM's usage stats are off (VLLM_NO_USAGE_STATS, DO_NOT_TRACK).
2. `observatory run --preset seed-5578 --backend gpu --model DIR --tokenizer DIR` to vLLM's
   abort (or --max-steps), recording, in its own process: the installed vLLM's own executor
   (`observatory run --dry-run` names it), its platform, a real model.
3. The same run on the sim backend (the same model config and tokenizer, so the same prompt
   lengths and blocks) for --compare-steps steps, then the first step at which the two runs'
   scheduler decisions differ (engine.analysis.divergence), if any in those steps. The sim's
   sequences run to max_tokens; a real (random) model may say EOS earlier, which is a
   difference in the workload, not in the scheduler: the report says which fields differ.
4. `exec_s` percentiles (the CUDA-synchronised executor time per step) of the gpu run, and
   optionally (--overhead-pairs N) the observer's overhead against a bare `LLMEngine.step()`
   loop on the same build, in alternating pairs, each arm in its own process.

Without CUDA it prints one "skipped" line and exits 0. The model builders run on any CPU;
tests/test_gpu_backend.py builds the tiny one and drives it through the sim backend and
through the gpu backend's path up to the device.

Run: python bench/gpu_smoke.py [--model DIR] [--keep DIR] [--max-steps 3000]
     [--compare-steps 200] [--requests N] [--overhead-pairs 0]
"""

from __future__ import annotations

import os

# before anything imports huggingface_hub, transformers or vLLM (they read these at import)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["VLLM_NO_USAGE_STATS"] = "1"
os.environ["DO_NOT_TRACK"] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>"]  # ids 0..3, as OPT's: pad 1, bos = eos 2
TINY = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "ffn_dim": 512}
PACKAGED_OPT = ROOT / "engine" / "adapters" / "models" / "opt-125m"
SEED_CPU_BLOCKS = 7281  # the seed's count (4 GiB on OPT-125m)


def _write_tokenizer(dest: Path, vocab_size: int) -> Any:
    """A byte-level BPE tokenizer trained on the seed's prompt source (any text encodes)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from engine.workload import seed_long_text

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
    return tokenizer


def _write_random_weights(dest: Path, config: Any, seed: int) -> None:
    import torch
    from transformers import OPTForCausalLM

    torch.manual_seed(seed)
    model = OPTForCausalLM(config).to(torch.float16)
    model.save_pretrained(dest, safe_serialization=True)


def build_tiny_opt(dest: str | os.PathLike[str], *, vocab_size: int = 512, seed: int = 0) -> Path:
    """Write a tiny random-weight OPT model and its tokenizer to `dest`; return the directory.

    Head size 64 is the smallest vLLM 0.5's paged attention supports; fp16 runs on every CUDA
    GPU (bf16 would not). For tests: it builds in seconds on a CPU."""
    from transformers import OPTConfig

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    tokenizer = _write_tokenizer(dest, vocab_size)
    config = OPTConfig(vocab_size=tokenizer.get_vocab_size(), max_position_embeddings=2048,
                       word_embed_proj_dim=TINY["hidden_size"], bos_token_id=2, eos_token_id=2,
                       pad_token_id=1, torch_dtype="float16", **TINY)
    _write_random_weights(dest, config, seed)
    return dest


def build_random_opt125m(dest: str | os.PathLike[str], *, seed: int = 0) -> Path:
    """The packaged opt-125m config (facebook/opt-125m's architecture: the seed's model, so its
    block size and the seed's 7281 CPU blocks are the issue's) with random fp16 weights, and a
    tokenizer trained on the seed's source. Only the weights differ from the seed's model."""
    from transformers import OPTConfig

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    _write_tokenizer(dest, vocab_size=4096)
    config = OPTConfig.from_pretrained(PACKAGED_OPT, torch_dtype="float16")
    _write_random_weights(dest, config, seed)
    return dest


def smoke_spec(model_dir: str, steps: int, requests: int):
    """The seed's workload shape (seed-5578, fewer requests) on `model_dir` on the gpu backend,
    with the seed's block counts: 8192 GPU blocks and 7281 CPU blocks, the latter through the
    swap-space translation. For tests and the overhead arms."""
    from engine.spec import preset_spec

    return preset_spec("seed-5578", backend="gpu", model=model_dir, tokenizer=model_dir,
                       requests=requests, max_steps=steps,
                       num_cpu_blocks=SEED_CPU_BLOCKS).validated()


# ---- the seed to its abort, gpu and sim, each through `observatory run` ----------------------
def observatory_run(backend: str, model_dir: str, record: Path, max_steps: int,
                    requests: int | None) -> tuple[int, float]:
    """`observatory run` of the seed preset on `backend`; (exit code, wall seconds).
    0 finished or reached --max-steps, 3 vLLM aborted (the seed's expected end)."""
    argv = [sys.executable, "-m", "tui.cli", "run", "--preset", "seed-5578", "--backend",
            backend, "--model", model_dir, "--tokenizer", model_dir, "--max-steps",
            str(max_steps), "--record", str(record)]
    if requests is not None:
        argv += ["--requests", str(requests)]
    started = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=_child_env())
    if out.returncode not in (0, 3):
        tail = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"gpu_smoke: the {backend} run failed (exit {out.returncode}): {tail}")
    return out.returncode, time.perf_counter() - started


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


def compare_decisions(gpu_steps: list, sim_steps: list, steps: int) -> str:
    """One line: the first `steps` steps' decisions, gpu against sim."""
    from engine.analysis.divergence import decision_diff, first_difference

    a, b = gpu_steps[:steps], sim_steps[:steps]
    first = first_difference(a, b)
    if first is None:
        return f"decisions: identical in the first {len(a)} steps (gpu against sim)"
    if first > min(a[-1].step, b[-1].step):
        return f"decisions: identical until step {first - 1}, where one run stopped"
    fields = decision_diff(a[first - a[0].step], b[first - b[0].step])
    return (f"decisions: identical in steps {a[0].step}-{first - 1}; step {first} differs in "
            f"{', '.join(fields)}")


def percentiles(values: list[float]) -> str:
    values = sorted(values)

    def at(q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))] * 1e3

    return (f"p50 {at(0.5):.3f} ms, p90 {at(0.9):.3f} ms, p99 {at(0.99):.3f} ms, "
            f"max {values[-1] * 1e3:.3f} ms over {len(values)} steps "
            f"(sum {sum(values):.2f} s)")


def seed_to_abort(model_dir: str, out_dir: Path, args: argparse.Namespace) -> None:
    from engine.stream.reader import load
    from engine.stream.records import EngineAborted, StepRecord

    gpu_path, sim_path = out_dir / "gpu.jsonl.zst", out_dir / "sim.jsonl.zst"
    code, wall = observatory_run("gpu", model_dir, gpu_path, args.max_steps, args.requests)
    gpu = load(gpu_path)
    header = gpu.header
    steps = [i for i in gpu.all_items() if isinstance(i, StepRecord)]
    aborts = [i for i in gpu.all_items() if isinstance(i, EngineAborted)]
    print(f"vLLM {header.vllm_version} on {header.device.name} (capability "
          f"{header.device.capability}, CUDA {header.device.cuda}, torch {header.device.torch}, "
          f"driver {header.device.driver})")
    end = (f"vLLM aborted at step {aborts[0].step}" if aborts else
           f"no abort in {len(steps)} steps (exit {code})")
    print(f"gpu run of seed-5578: {end}, {wall:.1f} s; recording {gpu_path}")
    print(f"exec_s: {percentiles([s.exec_s for s in steps if s.exec_s > 0])}")
    _, sim_wall = observatory_run("sim", model_dir, sim_path, args.compare_steps, args.requests)
    sim_steps = [i for i in load(sim_path).all_items() if isinstance(i, StepRecord)]
    print(compare_decisions(steps, sim_steps, args.compare_steps))


# ---- the observer's overhead: observed and bare arms, each in its own process ---------------
def run_observed(spec) -> dict[str, Any]:
    import msgspec

    from engine.adapters.v0.build import shutdown_engine
    from engine.session import Session
    from engine.stream.records import StepRecord

    session = Session(spec)
    steps: list[StepRecord] = []
    session.subscribe(lambda item: steps.append(item) if isinstance(item, StepRecord) else None)
    try:
        session.run()
    finally:
        shutdown_engine(session.engine)
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

    from engine.adapters.v0.build import build_engine, shutdown_engine
    from engine.workload import Workload

    built = build_engine(spec)
    engine = built.engine
    try:
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
    finally:
        shutdown_engine(engine)
    return {"loop_s": ends[-1] - ends[0], "steps": len(ends)}


def _arm(kind: str, model_dir: str, steps: int, requests: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--arm", kind, "--model", model_dir,
                          "--max-steps", str(steps), "--requests", str(requests)],
                         capture_output=True, text=True, env=_child_env(), timeout=1800)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"gpu_smoke: the {kind} arm failed: {tail}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def overhead(model_dir: str, pairs: int, steps: int, requests: int) -> None:
    observed, bare = [], []
    for pair in range(pairs):  # alternate, so drift hits both arms alike
        order = ("observed", "bare") if pair % 2 == 0 else ("bare", "observed")
        for kind in order:
            result = _arm(kind, model_dir, steps, requests)
            (observed if kind == "observed" else bare).append(result)
    per_step_obs = [r["loop_s"] / max(1, r["steps"] - 1) for r in observed]
    per_step_bare = [r["loop_s"] / max(1, r["steps"] - 1) for r in bare]
    med_obs, med_bare = statistics.median(per_step_obs), statistics.median(per_step_bare)
    exec_med = statistics.median(statistics.median(r["exec_s"]) for r in observed)
    print(f"seconds per step, median of {pairs} alternating pairs ({steps} steps, {requests} "
          f"requests): observed {med_obs * 1e3:.3f} ms, bare {med_bare * 1e3:.3f} ms, observer "
          f"overhead {(med_obs / med_bare - 1) * 100:+.1f}%; executor share of an observed "
          f"step {exec_med / med_obs * 100:.0f}%")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", metavar="DIR",
                        help="a local model directory (weights, config, tokenizer); default: "
                             "the packaged opt-125m config with random weights")
    parser.add_argument("--keep", metavar="DIR",
                        help="write the built model and the two recordings here and keep them")
    parser.add_argument("--max-steps", type=int, default=3000,
                        help="stop the gpu run here if vLLM has not aborted (default 3000)")
    parser.add_argument("--compare-steps", type=int, default=200)
    parser.add_argument("--requests", type=int, help="default: the seed's 10,000")
    parser.add_argument("--overhead-pairs", type=int, default=0,
                        help="also measure the observer's overhead in N alternating pairs")
    parser.add_argument("--arm", choices=("observed", "bare"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    from engine.adapters.v0.build import cuda_available

    if not cuda_available():
        print("gpu_smoke: skipped: no CUDA device (torch.cuda.is_available() is False)")
        return 0
    if args.arm:
        from engine import logs

        logs.install()  # vLLM's lines stay out of the JSON on stdout
        spec = smoke_spec(args.model, args.max_steps, args.requests or 256)
        result = run_observed(spec) if args.arm == "observed" else run_bare(spec)
        print(json.dumps(result))
        return 0

    out_dir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gpu-smoke-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        if args.model:
            model_dir = str(Path(args.model).expanduser().resolve())
            print(f"model: {model_dir}")
        else:
            model_dir = str(build_random_opt125m(out_dir / "opt-125m-random"))
            print(f"model: packaged opt-125m config, random fp16 weights: {model_dir}")
        seed_to_abort(model_dir, out_dir, args)
        if args.overhead_pairs:
            overhead(model_dir, args.overhead_pairs, 200, args.requests or 256)
    finally:
        if not args.keep:
            shutil.rmtree(out_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
