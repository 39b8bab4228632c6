"""The simulated clock: how long a step would take on a GPU of the seed's class.

The sim backend computes nothing, so its wall time says nothing about a GPU. Each step instead
gets a simulated duration from four terms:

    base_s                                  fixed cost of a step (launch, sampling, python)
  + per_prefill_token_s  * prompt tokens    prefill chunks are compute-bound
  + per_decode_seq_s     * decode seqs      one new token per running sequence
  + per_context_token_s  * context tokens   attention reads every cached token of every seq

The defaults put a step of the seed's steady state (about 35 running groups x n=8, so 280
sequences, with contexts near 800 tokens) at about 18 ms, which is the seed log's ~15,000
generated tokens/s. They are a model of one GPU class, not a measurement of yours; pass your
own with --cost to compare against a real trace.
"""

from __future__ import annotations

import msgspec

from engine.errors import ConfigError


class CostModel(msgspec.Struct, frozen=True, kw_only=True):
    base_s: float = 0.005
    per_prefill_token_s: float = 2.0e-6
    per_decode_seq_s: float = 3.0e-5
    per_context_token_s: float = 2.0e-8

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return (self.base_s + self.per_prefill_token_s * prefill_tokens
                + self.per_decode_seq_s * decode_seqs
                + self.per_context_token_s * context_tokens)

    def validate(self) -> None:
        for name in self.__struct_fields__:
            if getattr(self, name) < 0:
                raise ConfigError(f"cost model coefficient {name} must be >= 0")

    @classmethod
    def parse(cls, text: str) -> "CostModel":
        """'base_s=0.004,per_decode_seq_s=2e-5' -> CostModel; unknown keys are an error."""
        values: dict[str, float] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            key, sep, raw = item.partition("=")
            if not sep or key not in cls.__struct_fields__:
                raise ConfigError(f"bad --cost item {item!r}: use KEY=SECONDS with KEY one of "
                                  f"{', '.join(cls.__struct_fields__)}")
            try:
                values[key] = float(raw)
            except ValueError:
                raise ConfigError(f"bad --cost value {raw!r} for {key}: not a number") from None
        model = cls(**values)
        model.validate()
        return model
