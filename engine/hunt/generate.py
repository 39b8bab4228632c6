"""Random small workloads and engine settings, from a seed.

Workload `index` of hunt `seed` is drawn from `random.Random("hunt:SEED:INDEX")` and its engine
from `random.Random("hunt:SEED:engine:INDEX // ENGINE_BATCH")` (both seeded from the string's
sha512: the same in every process and under any PYTHONHASHSEED), so any worker can make any
workload and a hunt's workloads do not depend on how they were spread. ENGINE_BATCH
consecutive workloads share one engine's settings: a worker builds it once and resets it
between them (engine.hunt.warm).

What is drawn. The engine: the model, KV blocks (a drawn multiple of one full context; CPU
swap blocks on V0 as a drawn share of them), `max_num_seqs`, the token budget, chunked prefill
and the preemption mode (V0), prefix caching, the full-ISL rule, a long-prefill threshold,
async scheduling and the CPU tier (V1, where the release runs them on the sim). The
workload: the policy (mostly `off`), samples per request (`n`), prompt and output length
ranges, how many requests (a few, a few dozen, up to MAX_REQUESTS), outputs sized so that the
workload's KV demand is a drawn multiple of the GPU blocks (so pressure, and preemption, are
common at any request count), shared prompt prefixes, and arrivals (all at once, Poisson at a
drawn rate, or bursts).

On V1 the draws aim where its admission bugs live: the longest prompt is a drawn share of the
KV cache (V1 admits a whole prompt, or chunks of several, against the blocks free), the cache
is drawn tight more often, now and then outputs are long whatever the demand (a request that
decodes for hundreds of steps is what others wait behind and grow into), and vLLM's full-ISL
rule is mostly on, as it is by default from 0.29. V0's draws are unchanged (the findings the
guide reports came from them; tests/test_hunt.py pins them).

Every range is the generator's own: it never reads engine/spec.py's PRESETS, so what the hunt
finds it finds from its own draws. Lengths stay within the model's context, so vLLM never
refuses a request for its length: that would be our draw, not a bug.
"""

from __future__ import annotations

import random
from typing import Any

from engine.hunt.caps import Caps
from engine.hunt.case import Case, Row
from engine.kinds import kind_of

MODELS = {"opt-125m": 2048, "llama-16k": 16384}  # packaged sim configs: max context
BLOCK = 16
TRACE_BLOCK = 512  # tokens per Mooncake hash id
ENGINE_BATCH = 8
MAX_REQUESTS = 96
SAMPLE_COUNTS = {"v0": (1, 1, 2, 4, 8), "v1": (1, 1, 1, 2, 4)}  # `n`, drawn per workload


def generate(seed: int, index: int, caps: Caps, policy: str | None = None) -> Case:
    """Workload `index` of hunt `seed` for the installed release; `policy` fixes the policy
    (`hunt --policy P`), else it is drawn (mostly `off`)."""
    settings = engine_settings(seed, index // ENGINE_BATCH, caps)
    rng = random.Random(f"hunt:{seed}:{index}")
    fits = [p for p in caps.policies  # per-iteration-count acts under async scheduling only
            if settings.get("async_scheduling") or "per-iteration-count" not in p]
    settings["policy"] = policy or ("off" if rng.random() < 0.6 else rng.choice(fits))
    n = rng.choice(SAMPLE_COUNTS[caps.kind])
    settings["trace_n"] = min(n, settings["max_num_seqs"])
    rows = _rows(rng, MODELS[settings["model"]], settings,
                 shared_prompt=not kind_of(caps.kind).fans_out_samples)
    return Case(seed=seed, index=index, settings=settings, rows=rows)


def engine_settings(seed: int, batch: int, caps: Caps) -> dict[str, Any]:
    """The engine of workloads batch*ENGINE_BATCH .. +ENGINE_BATCH-1 of hunt `seed`."""
    rng = random.Random(f"hunt:{seed}:engine:{batch}")
    return ENGINE_DRAWS[caps.kind](rng, caps)


def _engine(rng: random.Random, model: str, sizes: list[float]) -> dict[str, Any]:
    """What every kind's engine draws: KV blocks for `model` (one of `sizes` full contexts)
    and the seats."""
    full = MODELS[model] // BLOCK + 2  # vLLM refuses a cache that cannot hold one context
    return {
        "model": model, "block_size": BLOCK,
        "num_gpu_blocks": int(full * rng.choice(sizes)),
        "max_num_seqs": rng.choice([2, 4, 8, 16, 32, 64, 128, 256]),
    }


def _v0_engine(rng: random.Random, caps: Caps) -> dict[str, Any]:
    """V0's: the small model, swap blocks, chunked prefill and the preemption mode."""
    settings = _engine(rng, "opt-125m", [1.05, 1.5, 2.5, 5, 10])
    chunked = rng.random() < 0.75
    settings.update(
        num_cpu_blocks=max(8, int(settings["num_gpu_blocks"]
                                  * rng.choice([0.05, 0.25, 0.5, 1.0, 2.0]))),
        enable_chunked_prefill=chunked,
        max_num_batched_tokens=rng.choice([256, 512, 1024, 2048, 4096] if chunked
                                          else [2048, 4096, 8192]),
        preemption_mode=rng.choice(["swap", "swap", "recompute"]))
    return settings


def _v1_engine(rng: random.Random, caps: Caps) -> dict[str, Any]:
    """V1's: either model, prefix caching, the full-ISL rule, a long-prefill threshold, async
    scheduling and the CPU tier (where the release runs them on the sim)."""
    # its admission bugs live where one context is a large share of the cache: the cache is
    # drawn tight more often than V0's (whose draws are as they were: its findings stand)
    settings = _engine(rng, "opt-125m" if rng.random() < 0.6 else "llama-16k",
                       [1.05, 1.25, 1.5, 2.5, 5])
    tier = caps.cpu_tier and rng.random() < 0.2
    settings.update(
        preemption_mode="recompute",
        max_num_batched_tokens=rng.choice([256, 512, 1024, 2048, 4096, 8192]),
        enable_prefix_caching=tier or rng.random() < 0.5,
        scheduler_reserve_full_isl=rng.random() < 0.7,  # vLLM's default (0.29+): mostly on
        long_prefill_token_threshold=rng.choice([0, 0, 0, 64, 128, 512]),
        async_scheduling=caps.async_scheduling and rng.random() < 0.25)
    if tier:
        settings.update(kv_offloading_gib=rng.choice([0.01, 0.05, 0.2, 1.0]),
                        offload_bandwidth_gbps=rng.choice([0.5, 2.0, 25.0]),
                        offload_eviction=rng.choice(["lru", "arc"]))
    return settings


ENGINE_DRAWS = {"v0": _v0_engine, "v1": _v1_engine}


def _rows(rng: random.Random, max_len: int, settings: dict[str, Any], *,
          shared_prompt: bool) -> list[Row]:
    n = settings["trace_n"]
    count = rng.choice([rng.randint(1, 8), rng.randint(8, 32), rng.randint(32, MAX_REQUESTS)])
    if shared_prompt:  # V0
        lo = rng.choice([128, 512, 2048, 4096] if max_len > 4096 else [16, 64, 256, 512])
        hi = min(lo * rng.choice([1, 2, 4, 8]), max_len - 300)
    else:  # V1: the longest prompt as a drawn share of the KV cache, since what V1 admits
        # (a whole prompt, or chunks of several) is decided against the blocks free
        cache = settings["num_gpu_blocks"] * BLOCK
        hi = max(16, int(min(max_len - 300, cache * rng.choice([0.02, 0.1, 0.3, 0.6, 0.9]))))
        lo = max(16, hi // rng.choice([1, 2, 4, 8]))
    # the KV the workload would hold at once, as a drawn multiple of the GPU blocks: each
    # request's output is sized to its share of it (so pressure, and preemption, are common
    # at any request count); now and then outputs of one token (a P/D prefill node's load)
    target = settings["num_gpu_blocks"] * rng.choice([0.3, 0.7, 1.5, 3.0, 8.0])
    one_token = rng.random() < 0.15
    # V1: now and then long outputs whatever the demand (a request that decodes for hundreds
    # of steps is what others wait behind, and what grows into the blocks of others)
    long_outputs = not shared_prompt and not one_token and rng.random() < 0.3
    groups = rng.choice([1, 2, 4, 8]) if rng.random() < 0.3 else 0
    shared = rng.choice([1, 2, 4])
    rows: list[Row] = []
    for i in range(count):
        prompt = rng.randint(lo, max(lo, hi))
        prompt_blocks = -(-prompt // BLOCK) * (1 if shared_prompt else n)
        share = max(1.0, target / count - prompt_blocks) / n  # V0's n samples fork one prompt
        output = 1 if one_token else int(share * BLOCK * rng.uniform(0.5, 1.5)) + 1
        if long_outputs:
            output = max(output, rng.randint(128, 1024))
        output = max(1, min(output, max_len - prompt - 1))
        blocks = -(-prompt // TRACE_BLOCK)
        own = [1_000_000 + i * 64 + k for k in range(blocks)]
        if groups:
            prefix = [10_000 * (i % groups + 1) + k for k in range(min(shared, blocks))]
            own = prefix + own[len(prefix):]
        rows.append(Row(timestamp=0, input_length=prompt, output_length=output,
                        hash_ids=own))
    times = _arrivals(rng, len(rows))
    return [Row(t, r.input_length, r.output_length, r.hash_ids) for t, r in zip(times, rows)]


def _arrivals(rng: random.Random, count: int) -> list[int]:
    """Arrival times in ms: all at 0, Poisson at a drawn rate, or bursts at drawn gaps."""
    pattern = rng.choice(["once", "once", "poisson", "bursts"])
    if pattern == "once":
        return [0] * count
    if pattern == "poisson":
        rate = rng.choice([2.0, 10.0, 50.0])  # requests per second
        t, times = 0.0, []
        for _ in range(count):
            times.append(int(t * 1000))
            t += rng.expovariate(rate)
        return times
    size, gap = rng.choice([2, 4, 8, 16]), rng.choice([100, 1000, 5000])
    return [(i // size) * gap for i in range(count)]
