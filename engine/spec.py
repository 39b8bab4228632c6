"""What to run: one RunSpec holds the backend, vLLM's engine knobs, the workload, the policy and
the simulated cost model. It is what a recording's header stores, so `verify` can rebuild the
exact run from a file.

Presets are plain dicts of overrides on the defaults, and every field can be overridden again
from a config file and the command line. Each field's `Setting` (engine/options.py) is its one
declaration: help, bounds and flag, from which the flags, config keys and grid keys are made.
`RunSpec.validated()` checks those bounds plus the rules that span fields, and turns bad input
into a ConfigError whose message is one line that says what is wrong and how to fix it.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from engine.costmodel import CostModel
from engine.errors import ConfigError
from engine.kinds import kind_of
from engine.options import MAX_BLOCKS, Setting, check_block_memory, check_struct, from_mapping
from engine.output_lengths import OutputLengths
from engine.policy import parse_policy, require_seats_engine

# OPT-125m's max_position_embeddings; a prompt must leave room for at least one output token.
DEFAULT_SIM_MODEL = "opt-125m"
DEFAULT_GPU_MODEL = "facebook/opt-125m"
MAX_STEP = 1_000_000_000  # --max-steps, --toggle-at: about 4 months of steps at 10 ms
TOGGLE_HELP = "switch policy before STEP runs (repeatable; STEP:POLICY, e.g. 500:strict)"


def _policy(value: str) -> None:
    parse_policy(value)


def parse_toggles(text: str) -> list[tuple[int, str]]:
    """`500:strict` (or several, comma-separated) -> [(500, "strict")]."""
    toggles = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        step, sep, policy = item.partition(":")
        if not sep or not step.strip().isdigit() or not policy:
            raise ConfigError(f"malformed --toggle-at {item!r}: use STEP:POLICY, e.g. "
                              f"500:strict or 300:watermark:0.5")
        toggles.append((int(step), policy))
    return toggles


def _check_toggles(toggles: list[tuple[int, str]]) -> None:
    for step, policy in toggles:
        if not 0 <= step <= MAX_STEP:
            raise ConfigError(f"--toggle-at step must be from 0 to {MAX_STEP:,}, got {step}")
        parse_policy(policy)


def _check_sha256(digest: str) -> None:
    if len(digest) != 64 or any(c not in "0123456789abcdefABCDEF" for c in digest):
        raise ConfigError(f"a sha256 is 64 hex digits, got {digest[:70]!r}")


def _check_cost(cost: CostModel) -> None:
    check_struct(cost, lambda option: f"--cost {option.name}")


def _check_lengths(lengths: OutputLengths) -> None:
    check_struct(lengths, lambda option: f"--lengths {option.name}")


class RunSpec(msgspec.Struct, kw_only=True):
    """Everything that determines a run. Sim runs with equal specs make equal decisions.

    Each field's Setting is its whole user-facing declaration (engine.options): the flag, the
    --config key, the sweep-grid key, the bounds and the help all come from it.
    """

    backend: Annotated[str, Setting("engine backend", choices=("sim", "gpu"))] = "sim"
    preset: Annotated[str, Setting("workload preset: seed-5578, seed-5578-fitted, demo (V0); v1-thrash, "
                                   "v1-concurrent-prefill, v1-head-of-line, v1-async-seats, v1-prefix-offload "
                                   "(V1); recorded (a recording's re-run: the defaults, its "
                                   "engine's settings given); one of the other engine kind is "
                                   "refused, naming the install command",
                                   metavar="NAME",
                                   default_text="seed-5578 where the installed vLLM runs V0, "
                                                "v1-thrash where it runs V1")] = "seed-5578"
    # None: opt-125m (sim: packaged config; gpu: facebook/opt-125m)
    model: Annotated[str | None, Setting(
        "sim: packaged config name or dir with config.json; gpu: hub id or local path "
        "(default: opt-125m)", metavar="NAME")] = None
    tokenizer: Annotated[str | None, Setting(
        "local HF tokenizer dir (sim: real prompt lengths)", metavar="DIR")] = None
    # None: vLLM derives it from the model's config (a re-run of a user's engine gives the
    # one that engine had: engine.analysis.rerun)
    max_model_len: Annotated[int | None, Setting(
        "the model's context in tokens, vLLM's max_model_len: a prompt and its output must fit "
        "it (default: the model config's, and at most that)", lo=1, hi=10_000_000,
        metavar="TOKENS")] = None

    # vLLM engine knobs (the seed's values by default)
    num_gpu_blocks: Annotated[int, Setting(
        "GPU KV-cache blocks", lo=1, hi=MAX_BLOCKS)] = 8192
    # None: derived by vLLM's own arithmetic from swap_space
    num_cpu_blocks: Annotated[int | None, Setting(
        "CPU swap blocks (gpu: turned into the swap space vLLM derives that count from; default: from --swap-space)", lo=1, hi=MAX_BLOCKS)] = None
    swap_space_gib: Annotated[float, Setting(
        "CPU swap space per GPU in GiB", lo=0, lo_open=True, hi=1024, flag="--swap-space",
        metavar="GIB")] = 4.0
    block_size: Annotated[int, Setting(
        "tokens per KV-cache block (V0 takes 8, 16 or 32; V1 also 64 and 128, the CPU "
        "platform's default)", choices=(8, 16, 32, 64, 128))] = 16
    max_num_batched_tokens: Annotated[int, Setting(
        "token budget of one step", lo=1, hi=10_000_000)] = 4096
    max_num_seqs: Annotated[int, Setting(
        "running sequences at most", lo=1, hi=65_536)] = 256
    enable_chunked_prefill: Annotated[bool, Setting(
        "vLLM's chunked-prefill scheduler (--no-chunked-prefill: its default scheduler, and "
        "the policies have nothing to gate)", flag="--chunked-prefill")] = True
    # None: vLLM's default (recompute single-sequence groups, swap the others). The presets
    # say "swap": the same thing for 0.5-0.6.3's n=8 groups, and what the bug needs from 0.6.4
    # on, where an n>1 request runs as n single-sequence groups that would be recomputed.
    preemption_mode: Annotated[str | None, Setting(
        "how vLLM preempts: swap or recompute (default: vLLM's own choice; the presets say "
        "swap)", choices=("swap", "recompute"))] = None

    # vLLM V1 (0.11+) engine knobs; the V0 engine ignores them
    enable_prefix_caching: Annotated[bool, Setting(
        "V1: vLLM's prefix caching (V0 runs without it, but for a re-run of a V0 engine that "
        "had it)", flag="--prefix-caching")] = False
    scheduler_reserve_full_isl: Annotated[bool, Setting(
        "V1: admit a request only when blocks for its whole context are free (vLLM PR #37307, "
        "on by default in 0.33; off is #25538; 0.18 has no such option and the "
        "observatory's hook enforces it)", flag="--reserve-full-isl")] = True
    long_prefill_token_threshold: Annotated[int, Setting(
        "V1: at most this many tokens of one prefill per step, so several prefills run at "
        "once (0: no limit)", lo=0, hi=10_000_000)] = 0
    async_scheduling: Annotated[bool, Setting(
        "V1 sim (0.33+): vLLM's async scheduling, its AsyncScheduler and the engine core's "
        "batch queue of 2 (schedule step N+1 while step N runs; vLLM's --async-scheduling)",
        flag="--async-scheduling")] = False
    # how the engine is stepped: vLLM's engine-core busy loop (`vllm serve`, a multiprocess
    # LLM) takes one more step after requests finish, to tell its workers; a re-run of such an
    # engine's recording does the same (engine.analysis.rerun)
    busy_loop: Annotated[bool, Setting(
        "V1: step as vLLM's engine-core busy loop does (vllm serve, a multiprocess LLM): once "
        "more after requests finish, to report them to the workers (default: as LLMEngine.step's "
        "callers do)", flag="--busy-loop")] = False
    # V1's CPU KV tier: vLLM's own OffloadingConnector (scheduler side, CPUOffloadingManager and
    # its eviction) with the sim executor as its worker (engine/adapters/v1/offload.py)
    kv_offloading_gib: Annotated[float, Setting(
        "V1: a CPU KV tier of this many GiB through vLLM's own OffloadingConnector (vLLM's "
        "--kv-offloading-size; 0: no tier)", lo=0, hi=1024, flag="--kv-offloading-size",
        metavar="GIB")] = 0.0
    offload_eviction: Annotated[str, Setting(
        "V1: the CPU tier's eviction policy (vLLM's CPUOffloadingManager)",
        choices=("lru", "arc"))] = "lru"
    offload_bandwidth_gbps: Annotated[float, Setting(
        "V1 sim: CPU tier transfer bandwidth in GB/s (10^9 bytes): a load or store takes its "
        "bytes over it and completes in the first step that ends after", lo=0, lo_open=True,
        hi=100_000, flag="--offload-bandwidth", metavar="GB/S")] = 25.0

    # workload
    # 100x the seed's: at t=0 vLLM holds every request (and its n sequences) in memory
    requests: Annotated[int, Setting("requests in the workload", lo=1, hi=1_000_000)] = 10_000
    n: Annotated[int, Setting("samples per request", lo=1, hi=4096)] = 8
    max_tokens: Annotated[int, Setting(
        "tokens generated per sample at most", lo=1, hi=10_000_000)] = 1000
    # each request's max_tokens drawn uniformly from [min_tokens, max_tokens]; None: max_tokens
    min_tokens: Annotated[int | None, Setting(
        "draw each request's output length from MIN to --max-tokens (default: all "
        "--max-tokens)", lo=1, hi=10_000_000, flag="--min-tokens", metavar="MIN")] = None
    # prompts that share prefixes (prefix caching, the CPU tier): request i starts with prefix
    # i mod N, then its own --prompt-len tokens
    shared_prefixes: Annotated[int, Setting(
        "requests start with one of this many shared prefixes, request i with prefix i mod N "
        "(needs --prompt-len; 0: none)", lo=0, hi=1_000_000)] = 0
    shared_prefix_len: Annotated[int, Setting(
        "tokens in each shared prefix (with --shared-prefixes)", lo=1, hi=10_000_000)] = 1024
    # None: the seed's text slices ("```python\n" + 1000 chars)
    prompt_len: Annotated[int | None, Setting(
        "tokens per prompt instead of the seed's text", lo=1, hi=10_000_000)] = None
    # prompt lengths drawn uniformly from [prompt_len, prompt_len_max]; None: all prompt_len
    prompt_len_max: Annotated[int | None, Setting(
        "draw each prompt's length from --prompt-len to this (default: all --prompt-len)",
        lo=1, hi=10_000_000)] = None
    # sim backend without a tokenizer: OPT BPE on Python source
    chars_per_token: Annotated[float, Setting(
        "sim: characters per token of the seed's text without a tokenizer", lo=0.1,
        hi=100)] = 3.2
    # requests per second of the run's clock (simulated on sim, wall on gpu); None: all at t=0
    arrival_rate: Annotated[float | None, Setting(
        "requests per second: simulated on sim, wall clock on gpu (default: all at t=0)", lo=0, lo_open=True,
        hi=1e9)] = None
    # a request trace replayed as the workload (engine/traces): each row arrives at its trace
    # time on the run's clock with its prompt length and its output length forced; the
    # workload fields above (requests, lengths, arrival rate, n, shared prefixes) are unused
    trace: Annotated[str | None, Setting(
        "replay this request trace as the workload: each request arrives at its trace time "
        "with its prompt and output lengths (Mooncake JSONL, Azure CSV, BurstGPT CSV, vllm "
        "bench serve --save-result --save-detailed JSON, or an observatory recording: its "
        "requests at the steps they arrived; the other workload settings are unused); "
        "Mooncake hash_ids become shared prompt blocks, 512 trace tokens = 512/--block-size "
        "engine blocks", metavar="FILE")] = None
    trace_format: Annotated[str, Setting(
        "the trace's format (auto: from its first line)",
        choices=("auto", "mooncake", "azure", "burstgpt", "vllm-bench", "recording"))] = "auto"
    trace_start: Annotated[float, Setting(
        "start this many trace seconds after its first request (earlier ones are skipped)",
        lo=0, hi=1e9, metavar="S")] = 0.0
    trace_limit: Annotated[int | None, Setting(
        "replay the first N requests (after --trace-start) (default: all)", lo=1,
        hi=1_000_000_000)] = None
    trace_speed: Annotated[float, Setting(
        "time compression: arrivals come X times faster than the trace's", lo=0, lo_open=True,
        hi=1e6)] = 1.0
    trace_n: Annotated[int, Setting(
        "samples per trace request (verl-style rollouts): V0 runs vLLM's n, V1 N requests "
        "with one prompt, ids LINE.K", lo=1, hi=4096)] = 1
    trace_skip_bad: Annotated[bool, Setting(
        "skip a trace's bad lines and count them in the summary (default: one line naming "
        "the first, exit 2)", flag="--trace-skip-bad")] = False
    # filled in when the run starts (engine/traces/source.py): recorded in the header, so
    # verify refuses a changed file
    trace_sha256: Annotated[str | None, Setting(
        "the trace file's expected sha256 (default: whatever it is; the header records it)",
        metavar="HEX", check=_check_sha256)] = None
    # sim backend: chance per generated token that the "model" says EOS
    eos_prob: Annotated[float, Setting(
        "sim: chance per generated token of EOS", lo=0, hi=1, hi_open=True)] = 0.0
    # requests added by one `add_burst` (the TUI's `a` key)
    burst_size: Annotated[int, Setting("requests added by one burst", lo=1, hi=100_000)] = 32
    # numpy, torch and vLLM all take it; numpy's range is the narrowest
    seed: Annotated[int, Setting("random seed", lo=0, hi=2**32 - 1)] = 0

    # observation
    policy: Annotated[str, Setting(
        "off | strict | watermark[:F] | reserve (V0); off | full-isl | whole-context | "
        "least-computed | skip-and-continue | per-iteration-count (with --async-scheduling), "
        "combined with + (V1)", metavar="POLICY",
        check=_policy)] = "off"
    max_steps: Annotated[int | None, Setting(
        "stop after this many steps", lo=1, hi=MAX_STEP)] = None
    # (step, policy): switch before that step runs
    toggles: Annotated[list[tuple[int, str]], Setting(
        TOGGLE_HELP, flag="--toggle-at", metavar="STEP:POLICY", parse=parse_toggles,
        check=_check_toggles, append=True)] = []

    cost: Annotated[CostModel, Setting(
        "sim cost model in seconds, each from 0 to 60, e.g. base_s=0.004,per_decode_seq_s=2e-5 "
        "(keys: engine/costmodel.py)", metavar="K=V,...",
        parse=CostModel.parse, check=_check_cost)] = CostModel()
    # sim: which sequences end early (engine/output_lengths.py); fitted by `observatory fit`
    lengths: Annotated[OutputLengths, Setting(
        "sim output lengths, e.g. early_share=0.3,request_corr=0.5,early_mean_tokens=200 "
        "(keys: engine/output_lengths.py)", metavar="K=V,...",
        parse=OutputLengths.parse, check=_check_lengths)] = OutputLengths()

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "run spec") -> "RunSpec":
        """Rebuild from a header (`where` names it in errors, e.g. the recording's path):
        unknown keys from newer versions are an error, not a guess, and so is any value out
        of its bounds."""
        return from_mapping(cls, data, where)

    @property
    def samples(self) -> int:
        """Sequences per request on V0 (vLLM's n): --trace-n for a trace, else --n."""
        return self.trace_n if self.trace is not None else self.n

    @property
    def model_name(self) -> str:
        if self.model:
            return self.model
        return DEFAULT_GPU_MODEL if self.backend == "gpu" else DEFAULT_SIM_MODEL

    def validated(self) -> "RunSpec":
        """Return self if every field makes sense, else raise ConfigError (one line)."""
        check_struct(self)
        if self.trace is not None and self.trace_n > self.max_num_seqs:
            raise ConfigError(f"--trace-n {self.trace_n} is more than --max-num-seqs "
                              f"{self.max_num_seqs}: vLLM could never schedule a request")
        if self.n > self.max_num_seqs and self.trace is None:
            raise ConfigError(f"--n {self.n} is more than --max-num-seqs {self.max_num_seqs}: "
                              f"vLLM could never schedule a request (each sample needs a "
                              f"sequence slot)")
        check_block_memory(self.num_gpu_blocks, self.num_cpu_blocks or 0)
        if self.min_tokens is not None and self.min_tokens > self.max_tokens:
            raise ConfigError(f"--min-tokens {self.min_tokens} is more than --max-tokens "
                              f"{self.max_tokens}: give MIN <= --max-tokens")
        if self.shared_prefixes and self.prompt_len is None and self.trace is None:
            raise ConfigError("--shared-prefixes needs --prompt-len (each request's own tokens "
                              "after its prefix)")
        if self.prompt_len_max is not None:
            if self.prompt_len is None:
                raise ConfigError("--prompt-len-max needs --prompt-len (the shortest prompt)")
            if self.prompt_len_max < self.prompt_len:
                raise ConfigError(f"--prompt-len-max {self.prompt_len_max} is less than "
                                  f"--prompt-len {self.prompt_len}")
        for asked in [self.policy] + [policy for _, policy in self.toggles]:
            require_seats_engine(parse_policy(asked), self.async_scheduling,
                                 self.backend == "sim")
        return self


_V1_THRASH: dict[str, Any] = {
    "model": "llama-16k",
    "requests": 32,
    "n": 1,
    "prompt_len": 4096,
    "prompt_len_max": 8192,
    "min_tokens": 256,
    "max_tokens": 1024,
    "block_size": 16,
    "num_gpu_blocks": 1200,
    "max_num_batched_tokens": 512,
    "max_num_seqs": 256,
    "enable_prefix_caching": False,
    "scheduler_reserve_full_isl": False,
    "burst_size": 8,
}
"""#25538 as reported (the `v1-thrash` preset); `v1-concurrent-prefill` differs only in its
admission settings."""

PRESETS: dict[str, dict[str, Any]] = {
    # A re-run of a recording (engine.analysis.rerun, `export --format trace`'s settings): the
    # defaults, with every engine setting the recording's and its requests its trace.
    "recorded": {},
    # vLLM issue #5578 exactly: LLM(model="facebook/opt-125m", enable_chunked_prefill=True,
    # max_num_batched_tokens=4096, num_gpu_blocks_override=8192), default swap_space=4 GiB,
    # 10,000 prompts of "```python\n" + 1000 characters of scheduler.py, n=8, max_tokens=1000.
    "seed-5578": {"preemption_mode": "swap"},
    # The same workload with the sim calibrated to the seed's own GPU log (`observatory fit
    # ../shared/seed/vllm-issue-5578.txt --preset seed-5578 --rounds 2`, values rounded; the
    # fit's output is docs/fit/seed-5578-fitted.toml): the sequences' output lengths and a cost
    # model of that GPU. It aborts 46 s after the first step, as the log does, where the plain
    # preset reproduces the mechanism in 805 steps. (With early_share 1, every sequence draws a
    # length and request_corr has no effect.)
    "seed-5578-fitted": {
        "preemption_mode": "swap",
        "cost": {"base_s": 0.009, "per_prefill_step_s": 0.0056, "per_prefill_token_s": 1.86e-6,
                 "per_decode_seq_s": 1.93e-5, "per_context_token_s": 3.52e-8,
                 "per_swap_block_s": 2.98e-5},
        "lengths": {"early_share": 1.0, "request_corr": 0.1, "early_mean_tokens": 2367.0},
    },
    # The same mechanism shrunk so that `off` aborts within seconds on a laptop CPU and the
    # fixed policies finish every request.
    "demo": {
        "num_gpu_blocks": 512,
        "num_cpu_blocks": 512,
        "max_num_seqs": 64,
        "max_num_batched_tokens": 512,
        "requests": 48,
        "n": 4,
        "max_tokens": 256,
        "prompt_len": 64,
        "burst_size": 8,
        "preemption_mode": "swap",
    },
    # vLLM's V1 engine (0.11+; vllm033). #25538 as reported: vLLM's own
    # scheduler_reserve_full_isl off, prompts of 4k-8k tokens, a token budget smaller than a
    # prompt, no prefix caching, and a KV cache for about 2.4 prompts (1,200 blocks of 16).
    "v1-thrash": _V1_THRASH,
    # The 0.33 default (scheduler_reserve_full_isl on) with several prefills in flight: its
    # check ignores what the prefills in flight will still claim, and the thrash remains.
    "v1-concurrent-prefill": {
        **_V1_THRASH,
        "scheduler_reserve_full_isl": True,
        "long_prefill_token_threshold": 128,
    },
    # vLLM #31731's head-of-line blocking, on 0.33's defaults (scheduler_reserve_full_isl on):
    # 16 requests at t=0 with prompts of 256 to 14,000 tokens. The first admitted holds 44% of
    # the cache; the second needs its whole context (803 blocks) and 581 are free, so vLLM's
    # scan stops at it, step after step, with 15 requests behind it, most of which would fit.
    # `skip-and-continue` (PR #35852's waiting-phase rule) admits them.
    "v1-head-of-line": {
        **_V1_THRASH,
        "requests": 16,
        "prompt_len": 256,
        "prompt_len_max": 14000,
        "min_tokens": 200,
        "max_tokens": 1000,
        "num_gpu_blocks": 1101,
        "scheduler_reserve_full_isl": True,
        "seed": 2,
    },
    # vLLM #45257 under async scheduling: a P/D prefill node's load, 96 requests at t=0 with
    # max_tokens=1 and prompts of 128 to 512 tokens, max_num_seqs 4 and room for every one of
    # them in the token budget and the KV cache. A request scheduled in step N is still in
    # vLLM's running list at step N+1 (its token is in flight) and is passed by there, yet its
    # seat counts: with `off` every other step schedules no one. `per-iteration-count` (PR
    # #45339's rule) admits the next four instead.
    "v1-async-seats": {
        "model": "opt-125m",
        "requests": 96,
        "n": 1,
        "prompt_len": 128,
        "prompt_len_max": 512,
        "max_tokens": 1,
        "block_size": 16,
        "num_gpu_blocks": 1024,
        "max_num_batched_tokens": 4096,
        "max_num_seqs": 4,
        "enable_prefix_caching": False,
        "async_scheduling": True,
        "burst_size": 8,
    },
    # vLLM's CPU KV tier (its OffloadingConnector, --kv-offloading-size): 64 requests over 4
    # shared prefixes of 1,024 tokens (plus 64 tokens of their own), prefix caching on, and a
    # GPU cache of 200 blocks, too small to keep the prefixes between their requests; a CPU
    # tier of 0.17 GiB (309 chunks of one block) keeps them, so they come back from CPU.
    # --kv-offloading-size 0 runs the same workload without the tier.
    "v1-prefix-offload": {
        "model": "opt-125m",
        "requests": 64,
        "n": 1,
        "shared_prefixes": 4,
        "shared_prefix_len": 1024,
        "prompt_len": 64,
        "max_tokens": 32,
        "block_size": 16,
        "num_gpu_blocks": 200,
        "max_num_batched_tokens": 2048,
        "max_num_seqs": 256,
        "enable_prefix_caching": True,
        "kv_offloading_gib": 0.17,
        "burst_size": 8,
    },
}


PRESET_FIXES: dict[str, str] = {
    # `reserve`, not `strict`: strict saves the seed on 0.5.0.post1 only and delays the abort
    # (0.6.3) or changes nothing (0.7.3, 0.10.2); reserve cannot abort on any V0 release
    "seed-5578": "reserve",
    "seed-5578-fitted": "reserve",
    "demo": "reserve",
    "v1-thrash": "whole-context",  # #25538: resume only when the whole context fits
    "v1-concurrent-prefill": "whole-context",  # full-isl is on already; whole-context counts
    # what the prefills in flight still claim
    "v1-head-of-line": "skip-and-continue",  # #31731, PR #35852
    "v1-async-seats": "per-iteration-count",  # #45257, PR #45339
    "v1-prefix-offload": "whole-context",  # no bug of its own: the V1 engine's usual fix
}
"""The policy each preset's `f` switches on (the live monitor's `f`: off <-> this fix): the
one that answers the bug the preset reproduces. Every preset has an entry."""


ANY_ENGINE_PRESETS = frozenset({"recorded"})
"""Presets made for either engine kind: `recorded`, a recording's re-run, takes its engine's
settings from the recording (engine.analysis.rerun)."""


def preset_engine(preset: str) -> str:
    """The engine kind a preset is made for ("v0", "v1"): the V1 presets are named v1-*.
    A preset of ANY_ENGINE_PRESETS answers "v0" here (its defaults are the V0 ones); ask
    ANY_ENGINE_PRESETS before refusing it on V1."""
    return "v1" if preset.startswith("v1-") else "v0"


def preset_fix(preset: str | None, engine: str) -> str:
    """The fix `f` switches on for a run of `preset` on an `engine` kind ("v0", "v1"): the
    preset's own when it is that engine's, else the engine's usual one."""
    fix = PRESET_FIXES.get(preset or "")
    if fix is not None and engine in parse_policy(fix).engine_kinds:
        return fix
    return kind_of(engine).usual_fix  # a preset that names none: an attached engine's stream


def preset_spec(name: str, **overrides: Any) -> RunSpec:
    """The preset's spec with explicit overrides (None means "not given") applied."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}: choose one of {', '.join(PRESETS)}")
    fields: dict[str, Any] = {"preset": name, **PRESETS[name]}
    fields.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return msgspec.convert(fields, RunSpec)
    except msgspec.ValidationError as exc:  # code that passed a wrong type
        raise ConfigError(f"bad setting: {str(exc).replace('`', '')}") from None


def resolve_spec(layers: list[tuple[str, dict[str, Any]]]) -> RunSpec:
    """The one rule for layered settings: a preset (the `preset` key of any layer, default
    seed-5578), then each layer in order (a config file, the flags, a sweep cell), each
    overriding the ones before. The same value means the same run whichever layer gives it.

    A swap space decides the CPU block count by vLLM's own arithmetic, so a layer that gives
    `swap_space_gib` without `num_cpu_blocks` also drops a CPU block count from the layers
    below it, the preset's included (the demo preset's 512 blocks would otherwise silently win
    over `swap-space = 2` in a config file). `where` names a layer in the one-line error for
    one that gives both."""
    fields: dict[str, Any] = {}
    derive_cpu_blocks = False
    for where, layer in layers:
        if layer.get("num_cpu_blocks") is not None and layer.get("swap_space_gib") is not None:
            raise ConfigError(f"{where}: give num_cpu_blocks or swap_space, not both (on the "
                              f"sim backend CPU blocks override the swap space)")
        if layer.get("swap_space_gib") is not None:
            derive_cpu_blocks = True
        if layer.get("num_cpu_blocks") is not None:
            derive_cpu_blocks = False
        fields.update({k: v for k, v in layer.items() if v is not None})
    preset = fields.pop("preset", None) or "seed-5578"
    spec = preset_spec(preset, **fields)
    if derive_cpu_blocks and spec.num_cpu_blocks is not None:
        spec = msgspec.structs.replace(spec, num_cpu_blocks=None)
    return spec
