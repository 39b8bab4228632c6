"""The requests a run sends: prompts, their lengths and their simulated arrival times.

The seed-5578 workload is built exactly as the issue builds it: prompt i is
"```python\\n" + long_text[i:i+1000], where long_text is the installed vllm/core/scheduler.py.
The gpu backend sends that text and vLLM tokenizes it. The sim backend has no tokenizer by
default, so it turns each prompt into ceil(len(text) / chars_per_token) token ids (OPT's BPE
gives about 3 to 3.5 characters per token on Python source); with --tokenizer it uses a local HF
tokenizer for the real count. The ids themselves do not matter to the scheduler (no prefix
caching), so they are a cheap deterministic pattern.

With --prompt-len every prompt has that many tokens instead (with --prompt-len-max, a length
drawn uniformly from the two; with --min-tokens, each request's max_tokens drawn from
--min-tokens to --max-tokens). Those draws come from a generator seeded by (seed, request
index), apart from the arrivals' one, so a run without them draws exactly what it drew before. Arrivals are all at t=0 (as in the
seed) or a Poisson process of --arrival-rate requests per simulated second. With
--shared-prefixes N, request i's prompt starts with shared prefix i mod N (--shared-prefix-len
tokens), then its own tokens: what prefix caching and V1's CPU tier reuse. Bursts (the TUI's
`a` key) continue the same prompt sequence, so a recording's bursts replay identically.

With --trace FILE the requests are the trace's instead (engine/traces): each row arrives at its
trace time, with its prompt length and its output length as max_tokens (V1 ignores EOS, so it
ends exactly there; V0's sim never says EOS unless --eos-prob), and its line number as its id.
With --trace-n N, V1 gets N requests per row (ids LINE.0 ... LINE.N-1, one prompt), as vLLM's V1
frontend makes of n=N; V0 gets one request of n=N. Bursts during a trace are synthetic
requests with ids b<index>, never a line number.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator

from engine.errors import ConfigError, EngineError
from engine.spec import RunSpec
from engine.traces.prompts import PrefixAllowance, block_prompt, prompt_tokens
from engine.traces.rows import Recorded
from engine.traces.source import TraceSource
from engine.traces.stats import TraceStats

SEED_PREFIX = "```python\n"
_NOT_RECORDED = Recorded()
SEED_SLICE = 1000


@dataclass(frozen=True)
class Request:
    request_id: str
    prompt_token_ids: list[int]
    prompt_text: str | None  # the text, where the workload has one
    arrival_s: float
    max_tokens: int  # the request's output length at most (SamplingParams.max_tokens)
    # A re-run's request (engine.analysis.rerun; a trace whose rows carry them): its samples
    # (None: the spec's), the output length of each sample the recording saw end (the rest run
    # to max_tokens), and the step it arrived before (None: it arrives by its time).
    n: int | None = None
    output_lens: tuple[int, ...] | None = None
    step: int | None = None

    @property
    def output_len(self) -> int | None:
        """The one sample's recorded output length (a V1 request is one sample)."""
        lens = self.output_lens
        return lens[0] if lens else None

    def due(self, step: int, now_s: float) -> bool:
        """Whether it arrives before `step` runs, at `now_s` on the run's clock."""
        return self.step <= step if self.step is not None else self.arrival_s <= now_s


@lru_cache(maxsize=1)
def seed_long_text() -> str:
    """The installed vllm/core/scheduler.py, read as a file (importing vllm is not needed)."""
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise EngineError("vllm is not installed: pip install -e . installs vLLM 0.5.0.post1")
    path = Path(list(spec.submodule_search_locations)[0]) / "core" / "scheduler.py"
    return path.read_text(encoding="utf-8")


_VOCAB = 50000  # request i's own token k is (i * 7919 + k) % _VOCAB + 3
_RING: list[int] = []  # 3 .. 50002 twice: each request's own tokens are one slice of it


def _own_tokens(index: int, length: int) -> list[int]:
    """Request `index`'s own `length` tokens, (index * 7919 + k) % 50000 + 3 for k < length, as
    a slice (C speed: the seed's 10,000 prompts were ~3 million Python additions at start-up)."""
    if not _RING:
        _RING.extend(range(3, _VOCAB + 3))
        _RING.extend(_RING)
    start = index * 7919 % _VOCAB
    if length <= _VOCAB:
        return _RING[start:start + length]
    return [(index * 7919 + k) % _VOCAB + 3 for k in range(length)]


def seed_prompt(i: int) -> str:
    text = seed_long_text()
    return SEED_PREFIX + text[i % len(text):i % len(text) + SEED_SLICE]


class Workload:
    """Deterministic request source for one run."""

    def __init__(self, spec: RunSpec, max_model_len: int,
                 count_tokens: Callable[[str], list[int]] | None = None,
                 fan_out_samples: bool = False) -> None:
        self.spec = spec
        self.max_model_len = max_model_len
        self._count_tokens = count_tokens
        self._rng = random.Random(spec.seed)
        self._next_index = 0
        self._clock = 0.0
        self._trace = TraceSource(spec, max_model_len) if spec.trace is not None else None
        self._fans_out = fan_out_samples
        self._allowance = PrefixAllowance(spec.block_size)
        if self._trace is not None:
            return  # the trace gives every length; its rows are checked as they are read
        prefix = self.prefix_len
        if spec.prompt_len is not None and prefix + spec.prompt_len >= max_model_len:
            what = f"a shared prefix of {prefix} + " if prefix else ""
            raise ConfigError(f"--prompt-len {spec.prompt_len} does not fit the model's context "
                              f"of {max_model_len} tokens: use at most "
                              f"{max_model_len - 1 - prefix}" + (f" ({what}the prompt)"
                                                                  if prefix else ""))
        longest = prefix + (spec.prompt_len_max or spec.prompt_len or 0) + spec.max_tokens
        if (spec.prompt_len_max or spec.min_tokens or prefix) and longest > max_model_len:
            raise ConfigError(f"the longest request ({prefix + (spec.prompt_len_max or spec.prompt_len or 0)} "
                              f"prompt + {spec.max_tokens} output tokens) does not fit the "
                              f"model's context of {max_model_len} tokens")

    @property
    def prefix_len(self) -> int:
        """Tokens of the shared prefix every prompt starts with (0: none)."""
        return self.spec.shared_prefix_len if self.spec.shared_prefixes else 0

    def _shared_prefix(self, index: int) -> list[int]:
        """Request `index`'s shared prefix: prefix `index mod N`, a pattern no request's own
        tokens follow (stride 31, not 1), so only the prefixes are shared blocks."""
        spec = self.spec
        if not spec.shared_prefixes:
            return []
        p = index % spec.shared_prefixes
        return [(p * 7919 + 31 * k + 17) % 50000 + 3 for k in range(spec.shared_prefix_len)]

    def _draws(self, index: int) -> tuple[int | None, int]:
        """(prompt length or None for the default, max_tokens) of request `index`."""
        spec = self.spec
        if spec.prompt_len_max is None and spec.min_tokens is None:
            return spec.prompt_len, spec.max_tokens
        rng = random.Random(f"{spec.seed}:{index}")  # str seeds do not depend on hash()
        length = (rng.randint(spec.prompt_len, spec.prompt_len_max)
                  if spec.prompt_len is not None and spec.prompt_len_max is not None
                  else spec.prompt_len)
        max_tokens = (rng.randint(spec.min_tokens, spec.max_tokens)
                      if spec.min_tokens is not None else spec.max_tokens)
        return length, max_tokens

    def _prompt(self, index: int, length: int | None) -> tuple[list[int], str | None]:
        spec = self.spec
        if length is not None:
            own = _own_tokens(index, length)
            return (self._shared_prefix(index) + own if spec.shared_prefixes else own), None
        text = seed_prompt(index)
        if self._count_tokens is not None:
            return self._count_tokens(text), text
        return _own_tokens(index, math.ceil(len(text) / spec.chars_per_token)), text

    def _make(self, arrival_s: float) -> Request:
        index = self._next_index
        self._next_index += 1
        length, max_tokens = self._draws(index)
        ids, text = self._prompt(index, length)
        request_id = str(index) if self._trace is None else f"b{index}"
        return Request(request_id, ids, text, arrival_s, max_tokens)

    @property
    def trace_stats(self) -> TraceStats | None:
        """What the trace's rows read so far add up to (None: not a trace run)."""
        if self._trace is None:
            return None
        self._trace.stats.prefix_tokens_allowed = self._allowance.tokens
        return self._trace.stats

    def _trace_requests(self) -> Iterator[Request]:
        assert self._trace is not None
        allow, fans_out, default_n = self._allowance.add, self._fans_out, self.spec.trace_n
        for row in self._trace.requests():
            recorded = row.recorded or _NOT_RECORDED
            if recorded.block_ids is not None:  # a recording's blocks, at the engine's size
                ids = block_prompt(row.line, row.input_len, recorded.block_ids,
                                   recorded.block_size)
                allow(row.input_len, recorded.block_ids, False, recorded.block_size)
            else:
                ids = prompt_tokens(row.line, row.input_len, row.hash_ids)
                allow(row.input_len, row.hash_ids, False)  # V0's n sequences share by forking
            name = recorded.request_id if recorded.request_id is not None else str(row.line)
            n = recorded.n if recorded.n is not None else default_n
            max_tokens = (recorded.max_tokens if recorded.max_tokens is not None
                          else row.output_len)
            lens = tuple(recorded.output_lens) if recorded.output_lens is not None else None
            if not fans_out or n == 1:
                yield Request(name, ids, None, row.arrival_s, max_tokens,
                              n=None if fans_out else n, output_lens=lens, step=recorded.step)
                continue
            for k in range(n):  # V1: n requests of one prompt, as vLLM's frontend makes them
                if k:
                    allow(row.input_len, None, True)
                yield Request(f"{name}.{k}", list(ids), None, row.arrival_s, max_tokens,
                              output_lens=(lens[k],) if lens and k < len(lens) else None,
                              step=recorded.step)

    def initial(self) -> Iterator[Request]:
        """The run's own requests in arrival order."""
        if self._trace is not None:
            yield from self._trace_requests()
            return
        rate = self.spec.arrival_rate
        for _ in range(self.spec.requests):
            if rate is not None:
                self._clock += self._rng.expovariate(rate)
            yield self._make(self._clock if rate is not None else 0.0)

    def burst(self, size: int, now_s: float) -> list[Request]:
        """`size` more requests arriving now, continuing the prompt sequence."""
        return [self._make(now_s) for _ in range(size)]
