"""The simulated clock: how long a step would take on a GPU of the seed's class.

The sim backend computes nothing, so its wall time says nothing about a GPU. Each step instead
gets a simulated duration from six terms:

    base_s                                  fixed cost of a step (launch, sampling, python)
  + per_prefill_step_s   if any prompt      V0 replays CUDA graphs for decode-only batches; a
                                            batch with a prefill chunk runs eagerly
  + per_prefill_token_s  * prompt tokens    prefill chunks are compute-bound
  + per_decode_seq_s     * decode seqs      one new token per running sequence
  + per_context_token_s  * context tokens   attention reads every cached token of every seq
  + per_swap_block_s     * swapped blocks   V0 copies swapped KV blocks GPU<->CPU inside the
                                            step, one small copy per block per layer

The defaults put a step of the seed's steady state (about 35 running groups x n=8, so 280
sequences, with contexts near 800 tokens) at about 18 ms, which is the seed log's ~15,000
generated tokens/s. They are a model of one GPU class, not a measurement of yours; pass your
own with --cost (or a [cost] table in --config) to compare against a real trace. The swap term
and the eager-prefill term are 0 by default, so a spec written before they existed times its
steps as it did then; `observatory fit` sets them from a log (the seed log's generation rate
dips in the windows that prefill and swap the most). Each coefficient is declared with its
bounds (engine/options.py): finite, 0 to 60 seconds.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from engine.options import Setting, check_struct, parse_items

# A coefficient is seconds per unit: above a minute per token or per step is no GPU at all.
MAX_SECONDS = 60.0


def _coefficient(help_text: str) -> Setting:
    return Setting(help_text, lo=0, hi=MAX_SECONDS)


class CostModel(msgspec.Struct, frozen=True, kw_only=True):
    base_s: Annotated[float, _coefficient("fixed seconds per step")] = 0.005
    per_prefill_step_s: Annotated[float, _coefficient(
        "extra seconds for a step with any prompt tokens")] = 0.0
    per_prefill_token_s: Annotated[float, _coefficient("seconds per prompt token")] = 2.0e-6
    per_decode_seq_s: Annotated[float, _coefficient("seconds per decoding sequence")] = 3.0e-5
    per_context_token_s: Annotated[float, _coefficient("seconds per cached token")] = 2.0e-8
    per_swap_block_s: Annotated[float, _coefficient(
        "seconds per KV block swapped out or in")] = 0.0

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int,
                     swap_blocks: int = 0) -> float:
        return (self.base_s + (self.per_prefill_step_s if prefill_tokens else 0.0)
                + self.per_prefill_token_s * prefill_tokens
                + self.per_decode_seq_s * decode_seqs
                + self.per_context_token_s * context_tokens
                + self.per_swap_block_s * swap_blocks)

    def validate(self) -> None:
        """Every coefficient finite and within [0, MAX_SECONDS] (engine.options)."""
        check_struct(self, lambda option: f"cost model coefficient {option.name}")

    @classmethod
    def parse(cls, text: str) -> "CostModel":
        """'base_s=0.004,per_decode_seq_s=2e-5' -> CostModel; unknown keys are an error, as
        they are under `[cost]` in a --config file (the same declarations check both)."""
        return parse_items(cls, text, "--cost", "SECONDS")
