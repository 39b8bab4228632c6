"""A user's rollout that meets vLLM issue #5578 (docs/guides/rerun.md): one `LLM` with chunked
prefill, n=4 samples per prompt, a small KV cache and a small swap space. On vLLM 0.5.0.post1
to 0.10.2 it dies with "Aborted due to the lack of CPU swap space". It knows nothing of the
observatory: run it under `observatory exec` to record it (`--sim` without a GPU).

    observatory exec --sim --record runs/ -- python docs/examples/rollout_5578.py opt-125m
"""

import sys
from pathlib import Path

from vllm import LLM, SamplingParams

model = sys.argv[1] if len(sys.argv) > 1 else "facebook/opt-125m"
if not Path(model).exists():  # a packaged config name (the sim needs no weights)
    packaged = Path(__file__).resolve().parents[2] / "engine" / "adapters" / "models" / model
    model = str(packaged) if packaged.exists() else model


def main() -> None:
    llm = LLM(model=model, skip_tokenizer_init=True, enable_chunked_prefill=True,
              max_num_batched_tokens=512, max_num_seqs=64, num_gpu_blocks_override=512,
              swap_space=0.3, preemption_mode="swap", seed=0)
    params = SamplingParams(n=4, max_tokens=256, detokenize=False)
    prompts = [{"prompt_token_ids": [3 + (i * 7919 + k) % 50000 for k in range(64)]}
               for i in range(48)]
    outputs = llm.generate(prompts, params, use_tqdm=False)
    print(f"finished {sum(o.finished for o in outputs)} of {len(prompts)} prompts")


if __name__ == "__main__":
    main()
