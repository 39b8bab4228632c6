"""The sim backend's executor for vLLM's V1 engine: no weights, no model, no GPU.

vLLM builds it from the dotted path in `distributed_executor_backend` and talks to it only
through `vllm.v1.executor.abstract.Executor`'s interface, so the real EngineCore, Scheduler and
KVCacheManager run unchanged around it:

- at start-up it answers the workers' RPCs: the KV-cache spec (one full-attention layer per
  model layer, sized from the model's config), the free memory (whatever `num_gpu_blocks_override`
  then overrides), and the rest with what a worker that has nothing to load returns;
- each step, `execute_model` returns a finished Future holding a `ModelRunnerOutput` that samples
  one token for every request whose computed tokens reach its whole context this step
  (`num_computed_tokens + num_scheduled_tokens >= prompt + outputs`), and none for a partial
  prefill chunk. The sampled token is a constant: the requests stop at their own max_tokens
  (they ignore EOS), so the run is the same whatever the "model" would have said.

Under vLLM's async scheduling (`--async-scheduling`: its AsyncScheduler, and the engine core's
batch queue of two steps) `execute_model` answers None and `sample_tokens` the output, as vLLM's
GPU worker does. The scheduler then lists a request again before the output of its previous
step is back: its output count in CachedRequestData includes that step's placeholder, so the
same rule samples exactly the tokens vLLM's model runner would.

It keeps each request's prompt length and output count from its admission (NewRequestData:
how a release sends a resumed request is the family's `new_request_lengths`), its output count
from the scheduler's CachedRequestData after that, and forgets a request when the scheduler
lists it as finished. The output it returns is built by the family (`model_runner_output`).

With a CPU tier (vLLM's OffloadingConnector, `--kv-offloading-size`) it also plays the
connector's worker side (engine.adapters.v1.sim_offload_worker): it completes every load and
store on the simulated clock and reports them in the step's `kv_connector_output`.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from vllm.v1.executor.abstract import Executor

from engine.adapters.v1.current import fam, tier

SAMPLED_TOKEN_ID = 7  # any id the vocabulary has; nothing reads it back
STOP_TOKEN_ID = 9
"""Sampled as the last token of a request given a length (`stop_at`): a re-run's request that
ended before its max_tokens on the recorded engine, which names this id in its stop_token_ids."""
DOTTED_PATH = f"{__name__}.SimExecutor"
DEFAULT_GPU_BLOCKS = 8192
"""The simulated GPU's KV blocks when nothing sets `num_gpu_blocks_override` (the V0 sim's
default too): 131,072 tokens at vLLM's default block size of 16."""


class SimExecutor(Executor):
    """vLLM V1 Executor that computes nothing (the sim backend)."""

    uses_ray = False
    supports_pp = False

    def _init_executor(self) -> None:
        self._prompt_len: dict[str, int] = {}
        self._outputs: dict[str, int] = {}
        self._stops: dict[str, int] = {}  # request -> the output length it stops at
        # SimOffloadWorker when vLLM runs its offloading connector. vLLM builds this executor
        # from a dotted path, without arguments: the driver sets the worker's bandwidth and
        # clock (engine.adapters.v1.tier) before the first step.
        self.offload = None
        self._sampled: Any = None  # async scheduling: the output sample_tokens hands over
        # read once: vLLM settles its config before it builds the executor
        self._async = bool(self.vllm_config.scheduler_config.async_scheduling)

    # ---- start-up RPCs -------------------------------------------------------------------
    def collective_rpc(self, method, timeout=None, args=(), kwargs=None,  # noqa: ANN001
                       non_block: bool = False, **extra: Any):
        name = method if isinstance(method, str) else getattr(method, "__name__", str(method))
        handler = getattr(self, f"_rpc_{name}", None)
        if handler is None:
            result = None
        else:
            result = handler(*args, **(kwargs or {}))
        results = [result]
        if non_block:
            future: Future = Future()
            future.set_result(results)
            return future
        return results

    def _rpc_get_kv_cache_spec(self) -> dict[str, Any]:
        from vllm.v1.kv_cache_interface import FullAttentionSpec

        model_config = self.vllm_config.model_config
        block_size = self.vllm_config.cache_config.block_size
        layers = model_config.get_num_layers(self.vllm_config.parallel_config)
        spec = FullAttentionSpec(
            block_size=block_size,
            num_kv_heads=model_config.get_num_kv_heads(self.vllm_config.parallel_config),
            head_size=model_config.get_head_size(),
            dtype=model_config.dtype,
        )
        return {f"model.layers.{i}.self_attn.attn": spec for i in range(layers)}

    def _rpc_initialize_from_config(self, kv_cache_configs: list[Any]) -> None:
        """The KV cache the engine sized: what one block holds, for the tier's transfers."""
        from engine.adapters.v1.sim_offload_worker import SimOffloadWorker

        if tier.is_offloading(self.vllm_config):
            self.offload = SimOffloadWorker(tier.bytes_per_block(kv_cache_configs[0]))

    def _rpc_determine_available_memory(self) -> int:
        """With `num_gpu_blocks_override` (the observatory's own engines, or the flag) that
        decides the pool and this only has to be enough for it. Without it (`vllm serve DIR
        --distributed-executor-backend engine.SimExecutor`), the memory of a simulated GPU of
        DEFAULT_GPU_BLOCKS blocks, or of one whole max_model_len request if that is more:
        reporting "plenty" would make vLLM build a Python object for each of millions of
        blocks and hang at start-up."""
        if self.vllm_config.cache_config.num_gpu_blocks_override is not None:
            return 1 << 40
        block_size = self.vllm_config.cache_config.block_size
        longest = -(-self.vllm_config.model_config.max_model_len // block_size)
        page = sum(spec.page_size_bytes for spec in self._rpc_get_kv_cache_spec().values())
        return max(DEFAULT_GPU_BLOCKS, longest + 1) * page

    def _rpc_get_supported_kv_cache_layouts(self) -> list[str]:
        return ["NHD"]

    def _rpc_compile_or_warm_up_model(self) -> Any:
        return fam.compile_result()  # nothing to compile, in the release's answer

    def _rpc_get_supported_tasks(self) -> tuple[str, ...]:
        return ("generate",)

    def check_health(self) -> None:
        return None

    def shutdown(self) -> None:
        return None

    @classmethod
    def supports_async_scheduling(cls) -> bool:
        """vLLM asks before it turns async scheduling on (`--async-scheduling`). The sim
        answers a step whole at `execute_model`, so its outputs are ready in any order vLLM's
        batch queue asks for them; off unless asked (engine.adapters.v1.build passes vLLM an
        explicit value, and the CPU platforms turn vLLM's default off)."""
        return True

    # ---- the step ------------------------------------------------------------------------
    def execute_model(self, scheduler_output, non_block: bool = False):  # noqa: ANN001
        """The step's output, or, under async scheduling, None for a step that scheduled
        tokens, as vLLM's GPU worker answers: its engine core then asks `sample_tokens`
        for the output (`step_with_batch_queue`, without blocking), and takes a step that
        scheduled nothing from here. Without async scheduling the output comes back here,
        as the sim always answered."""
        output = self.sample(scheduler_output)
        if self._async and scheduler_output.total_num_scheduled_tokens > 0:
            self._sampled = output
            output = None
        return _done(output) if non_block else output

    def sample_tokens(self, grammar_output, non_block: bool = False):  # noqa: ANN001
        """The output `execute_model` held back (the sim samples no grammar: the workload has
        none)."""
        output, self._sampled = self._sampled, None
        return _done(output) if non_block else output

    def sample(self, so: Any) -> Any:
        """The step's ModelRunnerOutput (the family builds it)."""
        prompt_len, outputs = self._prompt_len, self._outputs
        for rid in so.finished_req_ids:
            prompt_len.pop(rid, None)
            outputs.pop(rid, None)
            self._stops.pop(rid, None)
        scheduled = so.num_scheduled_tokens
        req_ids: list[str] = []
        sampled: list[list[int]] = []
        for new in so.scheduled_new_reqs:
            rid = new.req_id
            prompt_len[rid], outputs[rid] = fam.new_request_lengths(new)
            req_ids.append(rid)
            sampled.append(self._sample(rid, new.num_computed_tokens + scheduled[rid]))
        cached = so.scheduled_cached_reqs
        for i, rid in enumerate(cached.req_ids):
            outputs[rid] = cached.num_output_tokens[i]
            req_ids.append(rid)
            sampled.append(self._sample(rid, cached.num_computed_tokens[i] + scheduled[rid]))
        output = fam.model_runner_output(req_ids, sampled)
        if self.offload is not None:
            output.kv_connector_output = self.offload.step(tier.metadata_of(so))
        return output

    def forget_stops(self) -> None:
        """A warm engine's next workload (engine.hunt): its requests' lengths are its own."""
        self._stops.clear()

    def stop_at(self, request_id: str, length: int) -> None:
        """Sample STOP_TOKEN_ID as `request_id`'s output token number `length` (a re-run:
        engine.adapters.v1.driver), so it ends where the recorded request ended."""
        self._stops[request_id] = length

    def _sample(self, rid: str, computed_after: int) -> list[int]:
        context = self._prompt_len[rid] + self._outputs[rid]
        if computed_after < context:
            return []  # a partial prefill chunk: nothing to sample yet
        count = self._outputs[rid] = self._outputs[rid] + 1
        if self._stops and self._stops.get(rid) == count:
            return [STOP_TOKEN_ID]
        return [SAMPLED_TOKEN_ID]


def _done(value: Any) -> Future:
    """A finished Future holding `value` (the sim computes each step at once)."""
    future: Future = Future()
    future.set_result(value)
    return future
