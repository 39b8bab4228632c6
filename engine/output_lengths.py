"""How long the sim's sequences run: an output-length model richer than one EOS probability.

A real model's output lengths are not geometric. In the seed's GPU log some sequences stop
early (more than max_num_seqs / n = 32 groups run at once, so groups have lost sequences), and
whole requests finish long before max_tokens (63 by the abort), so early stops cluster by
request: a prompt that makes OPT-125m stop makes all its n samples stop. Three numbers say that:

- `early_share`: the share of sequences that end before max_tokens;
- `request_corr`: the share of requests in which that is decided once for all n sequences
  (all end early, with probability `early_share`, or none do); in the other requests each
  sequence decides on its own with probability `early_share`;
- `early_mean_tokens`: the mean output length of a sequence that ends early (exponential, at
  least 2 tokens: the sim never stops a sequence at its prefill sample).

Every draw comes from a generator seeded by (run seed, request id, sequence id), so a run is a
pure function of its spec whatever order vLLM schedules things in. With `early_share` 0 (the
default) no sequence ends early and no draw is made: older recordings replay unchanged.
"""

from __future__ import annotations

import random
from typing import Annotated

import msgspec

from engine.options import Setting, parse_items


class OutputLengths(msgspec.Struct, frozen=True, kw_only=True):
    early_share: Annotated[float, Setting(
        "share of sequences that end before max_tokens", lo=0, hi=1)] = 0.0
    request_corr: Annotated[float, Setting(
        "share of requests whose n sequences end early together", lo=0, hi=1)] = 0.0
    early_mean_tokens: Annotated[float, Setting(
        "mean output tokens of a sequence that ends early", lo=1, hi=10_000_000)] = 200.0

    @classmethod
    def parse(cls, text: str) -> "OutputLengths":
        """'early_share=0.3,request_corr=0.5' -> OutputLengths; unknown keys are an error."""
        return parse_items(cls, text, "--lengths", "VALUE")


class LengthSampler:
    """`target(request_id, seq_id)`: the output length at which that sequence says EOS, or None
    (it runs to max_tokens). Draws are cached: each sequence is decided once."""

    def __init__(self, model: OutputLengths, seed: int) -> None:
        self.model = model
        self.seed = seed
        self._request_p: dict[str, float] = {}
        self._targets: dict[tuple[str, int], int | None] = {}

    @property
    def active(self) -> bool:
        return self.model.early_share > 0.0

    def _p_early(self, request_id: str) -> float:
        p = self._request_p.get(request_id)
        if p is None:
            rng = random.Random(f"{self.seed}/{request_id}")
            share = self.model.early_share
            if rng.random() < self.model.request_corr:
                p = 1.0 if rng.random() < share else 0.0
            else:
                p = share
            self._request_p[request_id] = p
        return p

    def target(self, request_id: str, seq_id: int) -> int | None:
        key = (request_id, seq_id)
        if key in self._targets:
            return self._targets[key]
        target = None
        p = self._p_early(request_id)
        if p > 0.0:
            rng = random.Random(f"{self.seed}/{request_id}/{seq_id}")
            if rng.random() < p:
                target = max(2, 1 + int(rng.expovariate(1.0 / self.model.early_mean_tokens)))
        self._targets[key] = target
        return target


class ForcedLengths:
    """Recorded output lengths for a re-run (engine.analysis.rerun): each request's samples end
    where the recorded ones ended. A request's samples are alike to vLLM's scheduler (one group,
    blocks forked from one prompt), so a length goes to whichever sequence asks first:
    `first_token_stops` takes the samples that ended at their first token (the prompt step
    says EOS for that many), `target` gives each later sequence one of the rest, once. A
    sample the recording did not see end runs to max_tokens."""

    def __init__(self) -> None:
        self._left: dict[str, list[int]] = {}
        self._given: dict[tuple[str, int], int | None] = {}

    def __bool__(self) -> bool:
        return bool(self._left) or bool(self._given)

    def force(self, request_id: str, lengths: list[int] | tuple[int, ...],
              max_tokens: int) -> None:
        left = sorted(length for length in lengths if 0 < length < max_tokens)
        if left:
            self._left[request_id] = left

    def first_token_stops(self, request_id: str) -> int:
        left = self._left.get(request_id)
        if not left or left[0] != 1:
            return 0
        stops = 0
        while left and left[0] == 1:
            left.pop(0)
            stops += 1
        return stops

    def target(self, request_id: str, seq_id: int) -> int | None:
        key = (request_id, seq_id)
        if key in self._given:
            return self._given[key]
        left = self._left.get(request_id)
        target = left.pop() if left else None
        self._given[key] = target
        return target
