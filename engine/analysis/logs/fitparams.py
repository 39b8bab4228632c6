"""What `observatory fit` fits, per engine kind: the parameters (those that change the
scheduler's decisions, a sim each, and those that only time them, a re-timing each), where
their searches start and lean, and how they map to and from a RunSpec.

V0 (engine.output_lengths): three numbers of an output-length model, six cost coefficients and
the warm-up. V1: its workload's own output-length draw (each request's max_tokens from
[min_tokens, max_tokens]), the four cost terms the V1 adapter charges, and the warm-up.
engine.analysis.logs.fit searches them.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from engine.analysis.logs.timeline import STATS_INTERVAL_S, V1_STATS_INTERVAL_S
from engine.analysis.logs.windows import METRICS
from engine.costmodel import CostModel
from engine.spec import RunSpec


@dataclass
class Param:
    name: str
    lo: float
    hi: float
    log_scale: bool  # steps multiply (True) or add (False)
    step: float  # initial factor (log) or increment (linear)


LENGTH_PARAMS: tuple[Param, ...] = (
    Param("lengths.early_share", 0.0, 1.0, False, 0.2),
    Param("lengths.request_corr", 0.0, 1.0, False, 0.25),
    Param("lengths.early_mean_tokens", 2.0, 100_000.0, True, 2.0),
)
CLOCK_PARAMS: tuple[Param, ...] = (
    Param("cost.base_s", 1e-4, 0.05, True, 2.0),
    Param("cost.per_decode_seq_s", 1e-7, 1e-3, True, 2.0),
    Param("cost.per_prefill_step_s", 1e-5, 0.5, True, 2.0),
    Param("cost.per_prefill_token_s", 1e-8, 1e-4, True, 2.0),
    Param("cost.per_context_token_s", 1e-10, 1e-6, True, 2.0),
    Param("cost.per_swap_block_s", 1e-7, 1e-2, True, 2.0),
    Param("warmup_s", 0.0, STATS_INTERVAL_S, False, 1.0),
)
PARAMS = LENGTH_PARAMS + CLOCK_PARAMS

LENGTH_STARTS: tuple[dict[str, float], ...] = (
    {"lengths.early_share": 1.0, "lengths.request_corr": 0.0,
     "lengths.early_mean_tokens": 2000.0},
    {"lengths.early_share": 0.4, "lengths.request_corr": 0.5,
     "lengths.early_mean_tokens": 300.0},
    {"lengths.early_share": 0.2, "lengths.request_corr": 0.0,
     "lengths.early_mean_tokens": 200.0},
)
"""Shapes the length search also starts from, when the spec has no output-length model of its
own: every sequence may stop at any token (close to one EOS probability), whole requests that stop
early, and a few short sequences. (From a spec whose sequences never end early, every neighbour
aborts within seconds and the search has no slope.)"""

CLOCK_PRIOR = CostModel(per_swap_block_s=3e-5, per_prefill_step_s=0.005)
"""What the cost fit starts from and leans towards: the default cost model, plus about 30 µs
per swapped block (one OPT-125m block is 590 kB, copied layer by layer over PCIe) and 5 ms for
a batch that cannot replay a CUDA graph because it holds a prefill chunk."""


V1_LENGTH_PARAMS: tuple[Param, ...] = (
    Param("workload.max_tokens", 2.0, 100_000.0, True, 1.25),
    Param("workload.min_share", 0.0, 1.0, False, 0.15),
)
"""The V1 sim's output-length model is its workload's: a request ends at its own max_tokens,
drawn uniformly from [min_tokens, max_tokens] (engine.workload); `min_share` is min_tokens /
max_tokens."""
V1_CLOCK_PARAMS: tuple[Param, ...] = (
    Param("cost.base_s", 1e-4, 0.05, True, 2.0),
    Param("cost.per_decode_seq_s", 1e-7, 1e-3, True, 2.0),
    Param("cost.per_prefill_token_s", 1e-8, 1e-4, True, 2.0),
    Param("cost.per_context_token_s", 1e-10, 1e-6, True, 2.0),
    Param("warmup_s", 0.0, V1_STATS_INTERVAL_S, False, 2.0),
)
"""What V1's clock charges (engine.adapters.v1.step_record): no swap term, and no eager-prefill
term, which V1 cannot tell from the fixed cost in a workload whose steps nearly all hold a
prefill chunk (it keeps the spec's value)."""
V1_METRICS = ("prompt_tps", "gen_tps", "running", "waiting", "gpu_pct", "preemptions")
"""V1's stats line (engine.analysis.logs.stats); its prefix-cache hit rate is not fitted: the
step records do not carry the prefix cache's queries."""


@dataclass(frozen=True)
class FitKind:
    """What the fit fits for one engine kind: the stats line's metrics, the parameters that
    change decisions (a sim each) and those that only time them (a re-timing each)."""

    engine: str
    metrics: tuple[str, ...]
    length_params: tuple[Param, ...]
    clock_params: tuple[Param, ...]
    clock_prior: CostModel
    interval_s: float
    length_starts: tuple[dict[str, float], ...]
    # The log's shape. V1's: one series per data-parallel engine (`Engine NNN:`), its stats
    # interval as the log shows it, fields a release does not print (not fitted there) and
    # preemptions printed only when there were some. V0's: one series every 5 s, every field.
    data_parallel: bool
    interval_logged: bool
    fields_by_release: bool
    zero_when_absent: tuple[str, ...]
    # The fit: a rugged score (start from the least-squares clock too); how many intervals the
    # sims run past the log's last window; whether a fitted run with fewer windows than the
    # log's is worth a warning (V0's runs end at their abort).
    rugged_score: bool
    tail_intervals: float
    warns_short_run: bool
    # What a fit of this kind's log needs, as its refusals say it.
    needs_vllm: str
    needs_preset: str

    @property
    def params(self) -> tuple[Param, ...]:
        return self.length_params + self.clock_params


V0 = FitKind("v0", METRICS, LENGTH_PARAMS, CLOCK_PARAMS, CLOCK_PRIOR, STATS_INTERVAL_S,
             LENGTH_STARTS, data_parallel=False, interval_logged=False,
             fields_by_release=False, zero_when_absent=(), rugged_score=False,
             tail_intervals=1.0, warns_short_run=False,
             needs_vllm="a V0 vLLM (0.5 to 0.10): run fit in the venv of a V0 extra, e.g. "
                        "vllm050",
             needs_preset="a V0 preset (--preset seed-5578) or a config of one")
V1 = FitKind("v1", V1_METRICS, V1_LENGTH_PARAMS, V1_CLOCK_PARAMS, CostModel(),
             V1_STATS_INTERVAL_S, (), data_parallel=True, interval_logged=True,
             fields_by_release=True, zero_when_absent=("preemptions",), rugged_score=True,
             tail_intervals=2.0, warns_short_run=True,
             needs_vllm="vLLM's V1 engine: run fit in the venv of the extra vllm033",
             needs_preset="a v1-* preset (--preset v1-thrash) or a config of one")
FIT_KINDS = {kind.engine: kind for kind in (V0, V1)}
"""Each engine kind's fit, by the Header's `engine`."""


def get_params(spec: RunSpec, warmup_s: float, kind: FitKind | None = None) -> dict[str, float]:
    values = {f"cost.{k}": getattr(spec.cost, k) for k in spec.cost.__struct_fields__}
    values.update({f"lengths.{k}": getattr(spec.lengths, k)
                   for k in spec.lengths.__struct_fields__})
    values["workload.max_tokens"] = float(spec.max_tokens)
    values["workload.min_share"] = (spec.min_tokens or spec.max_tokens) / spec.max_tokens
    values["warmup_s"] = warmup_s
    return {p.name: values[p.name] for p in (kind or V0).params}


def apply_params(spec: RunSpec, values: dict[str, float]) -> RunSpec:
    cost = {k[5:]: v for k, v in values.items() if k.startswith("cost.")}
    lengths = {k[8:]: v for k, v in values.items() if k.startswith("lengths.")}
    workload: dict[str, int | None] = {}
    if "workload.max_tokens" in values:
        top = max(1, round(values["workload.max_tokens"]))
        low = max(1, round(values.get("workload.min_share", 1.0) * top))
        workload = {"max_tokens": top, "min_tokens": None if low >= top else low}
    return msgspec.structs.replace(spec, cost=msgspec.structs.replace(spec.cost, **cost),
                                   lengths=msgspec.structs.replace(spec.lengths, **lengths),
                                   **workload)
