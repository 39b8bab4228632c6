"""What watching a user's own V0 engine costs it (issue #19's "at most 5% of the engine's
steps/s"): steps/s of one `LLM` driven by its own `generate`, attached (the scheduler hook,
every step's record built, encoded and written to a .jsonl.zst recording, the policy `off`)
against the same engine bare (the handle closed: vLLM's own methods back).

Arms alternate within each pair (attached first in odd pairs, bare first in even ones), each
arm a fresh batch of the same requests on the same engine; the ratio of each pair is
attached/bare, and the median of the pairs is the figure (target >= 0.95). The engine runs the
observatory's sim executor, so its steps are as cheap as a V0 step gets: a real model's step
is longer and the observer's share smaller.

Run (any V0 venv): python bench/bench_attach.py [--pairs P] [--requests N] [--max-tokens T]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODEL = Path(__file__).resolve().parents[1] / "engine" / "adapters" / "models" / "opt-125m"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()

    from vllm import LLM, SamplingParams  # vLLM first: its logging stays its own

    import engine
    from engine.adapters.v0 import attach as v0

    v0.install_sim()  # what `observatory exec --sim` installs
    v0.patch_engine_class(lambda built: None)
    llm = LLM(model=str(MODEL), skip_tokenizer_init=True, enable_chunked_prefill=True,
              max_num_batched_tokens=2048, max_num_seqs=256, swap_space=1,
              disable_log_stats=True)
    params = SamplingParams(n=8, max_tokens=args.max_tokens, detokenize=False)
    prompts = [{"prompt_token_ids": [3 + (i * 7 + k) % 1000 for k in range(100 + 5 * i)]}
               for i in range(args.requests)]
    step_calls = [0]
    records = [0]
    inner = llm.llm_engine.step

    def counted(*a, **k):  # the user's own view of the loop (outside the observer)
        step_calls[0] += 1
        return inner(*a, **k)

    def run() -> float:
        gc.collect()
        step_calls[0] = 0
        if "step" not in vars(llm.llm_engine):
            llm.llm_engine.step = counted  # attach wraps it; close puts it back
        start = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)
        return step_calls[0] / (time.perf_counter() - start)

    def attached(path: str) -> float:
        if "step" not in vars(llm.llm_engine):
            llm.llm_engine.step = counted
        handle = engine.attach(llm, record=path)
        try:
            rate = run()
        finally:
            handle.close()
        records[0] = handle.observer.step
        return rate

    from engine.attached.observer import Observer

    own = [0.0]  # seconds in the observer's per-step work (timed around it, on the loop)
    for name in ("before_step", "after_step"):
        method = getattr(Observer, name)

        def timed(self, _method=method):
            start = time.perf_counter()
            _method(self)
            own[0] += time.perf_counter() - start

        setattr(Observer, name, timed)
    tmp = tempfile.mkdtemp(prefix="bench-attach-")
    run()  # warm-up
    ratios, bare_rates, attached_rates = [], [], []
    own_per_step, bare_step = [], []
    for pair in range(args.pairs):
        own[0] = 0.0
        path = f"{tmp}/pair{pair}.jsonl.zst"
        if pair % 2 == 0:
            a, b = attached(path), run()
        else:
            b, a = run(), attached(path)
        assert records[0] == step_calls[0], "the attached arm must record every step"
        attached_rates.append(a)
        bare_rates.append(b)
        ratios.append(a / b)
        own_per_step.append(own[0] / step_calls[0])
        bare_step.append(1 / b)
        print(f"pair {pair}: attached {a:,.0f} steps/s, bare {b:,.0f} steps/s, ratio {a / b:.3f}",
              flush=True)
    print(f"{args.pairs} pairs of {step_calls[0]} steps ({args.requests} requests x n=8, "
          f"max_tokens {args.max_tokens}): attached {statistics.median(attached_rates):,.0f} "
          f"steps/s, bare {statistics.median(bare_rates):,.0f} steps/s (medians); "
          f"ratio attached/bare median {statistics.median(ratios):.3f} "
          f"[{min(ratios):.3f}-{max(ratios):.3f}] (target >= 0.95)")
    print(f"the observer's own work: {statistics.median(own_per_step) * 1e6:,.0f} us a step "
          f"(record built, encoded, written; median of the attached arms) against "
          f"{statistics.median(bare_step) * 1e6:,.0f} us for a bare step: "
          f"{statistics.median(own_per_step) / statistics.median(bare_step):.1%} "
          f"(the scheduler hook's own time inside vLLM's step is not in it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
