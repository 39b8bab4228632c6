"""The sim backend's model executor: vLLM's real engine, scheduler and block manager with a model
that computes nothing.

It implements the installed vLLM's `ExecutorBase` (one class for every supported release: it
defines the union of what each release's base requires, e.g. 0.5.1's `pin_lora`, 0.5.2's
prompt-adapter methods, 0.7's `collective_rpc`), so `LLMEngine` drives it exactly as it drives
the GPU executor. Its two jobs:

1. Report block counts. GPU blocks are whatever the spec asks for (vLLM then applies
   `num_gpu_blocks_override` itself); CPU blocks come from vLLM's own arithmetic,
   `swap_space_bytes // CacheEngine.get_cache_block_size(...)`, so the seed's 4 GiB on OPT-125m
   gives the seed log's 7281 blocks. `num_cpu_blocks` in the spec overrides that.
2. Return sampler output shaped like vLLM's sampler's, one `CompletionSequenceGroupOutput` per
   scheduled group in order: no samples for a prefill chunk that does not sample; `best_of`
   samples from the one prompt sequence when a prefill completes (so vLLM forks the `n`
   children itself); one sample per running sequence in decode.

Tokens are drawn from a seeded generator, so a sim run is a pure function of its spec. A real
model ends some sequences early with EOS; the sim draws the model's EOS id with probability
`eos_prob` per token (0 by default, as in the design that reproduced the seed: every sequence runs to max_tokens),
otherwise a uniform token that is never EOS. The spec's output-length model
(engine/output_lengths.py) picks, per sequence, an output length at which it says EOS. Without a tokenizer vLLM 0.5 has no EOS id of its
own, so the session passes it as `stop_token_ids`, which vLLM's StopChecker treats the same way.
"""

from __future__ import annotations

import random
from typing import Any, List, Set, Tuple

from engine.adapters.versions import family

from engine.errors import ConfigError
from engine.options import check_block_memory
from engine.output_lengths import ForcedLengths, LengthSampler, OutputLengths

_F = family("sim")
CompletionSequenceGroupOutput = _F.CompletionSequenceGroupOutput
SamplerOutput = _F.SamplerOutput
SequenceOutput = _F.SequenceOutput
_LOGPROB = _F.Logprob(logprob=-1.0)


def _not_eos(token: int, eos: int) -> int:
    """Map a draw from range(vocab - 1) onto the vocabulary without the EOS id."""
    return token + 1 if token >= eos else token


def eos_token_id(model_config) -> int:
    """The model's EOS id from its HF config (OPT: 2)."""
    eos = getattr(model_config.hf_config, "eos_token_id", None)
    if isinstance(eos, list):
        eos = eos[0] if eos else None
    return int(eos) if eos is not None else 0


class SimExecutor(_F.ExecutorBase):
    """An executor whose 'model' samples token ids from a seeded RNG and does nothing else."""

    # vLLM builds the executor from its own configs only; `configured` bakes ours into a
    # subclass, so two engines built at once never share settings.
    num_gpu_blocks_setting: int = 8192
    num_cpu_blocks_setting: int | None = None
    seed_setting: int = 0
    eos_prob_setting: float = 0.0
    lengths_setting: OutputLengths = OutputLengths()

    @classmethod
    def configured(cls, num_gpu_blocks: int, num_cpu_blocks: int | None, seed: int,
                   eos_prob: float, lengths: OutputLengths = OutputLengths()
                   ) -> type["SimExecutor"]:
        return type(cls.__name__, (cls,), {"num_gpu_blocks_setting": num_gpu_blocks,
                                           "num_cpu_blocks_setting": num_cpu_blocks,
                                           "seed_setting": seed,
                                           "eos_prob_setting": eos_prob,
                                           "lengths_setting": lengths})

    def _init_executor(self) -> None:
        self._num_gpu_blocks = self.num_gpu_blocks_setting
        self._num_cpu_blocks = self.num_cpu_blocks_setting
        self._rng = random.Random(self.seed_setting)
        self._vocab = self.model_config.get_vocab_size()
        self._eos_prob = self.eos_prob_setting
        self.eos_token_id = eos_token_id(self.model_config)
        sampler = LengthSampler(self.lengths_setting, self.seed_setting)
        self._lengths = sampler if sampler.active else None
        self._forced = ForcedLengths()  # a re-run's recorded lengths (force_lengths)
        self.steps_executed = 0

    def determine_num_available_blocks(self) -> Tuple[int, int]:
        if self._num_cpu_blocks is not None:
            return self._num_gpu_blocks, self._num_cpu_blocks
        block_bytes = _F.cpu_block_bytes(self.cache_config, self.model_config,
                                         self.parallel_config)
        num_cpu_blocks = int(self.cache_config.swap_space_bytes // block_bytes)
        swap_gib = self.cache_config.swap_space_bytes / 2**30
        if num_cpu_blocks < 1:  # vLLM would run, then abort at the first swap-out
            raise ConfigError(f"--swap-space {swap_gib:g} GiB holds no CPU block of "
                              f"{block_bytes:,} bytes for this model: give at least "
                              f"{block_bytes / 2**30:.2g} GiB, or --num-cpu-blocks")
        check_block_memory(self._num_gpu_blocks, num_cpu_blocks)  # before vLLM builds them
        return self._num_gpu_blocks, num_cpu_blocks

    def initialize_cache(self, num_gpu_blocks: int, num_cpu_blocks: int) -> None:
        self.num_gpu_blocks, self.num_cpu_blocks = num_gpu_blocks, num_cpu_blocks

    def forget_lengths(self) -> None:
        """A warm engine's next workload (engine.hunt): its requests' lengths are its own."""
        self._forced = ForcedLengths()

    def force_lengths(self, request_id: str, lengths: Any, max_tokens: int) -> None:
        """End `request_id`'s samples at these output lengths (a re-run: its recorded ones),
        whatever the spec's length model says."""
        self._forced.force(request_id, lengths, max_tokens)

    def execute_model(self, execute_model_req: Any) -> List[Any]:
        rand = self._rng.randrange
        uniform = self._rng.random
        vocab, eos, eos_prob = self._vocab, self.eos_token_id, self._eos_prob
        lengths = self._lengths
        forced = self._forced if self._forced else None
        outputs: list[CompletionSequenceGroupOutput] = []
        for meta in execute_model_req.seq_group_metadata_list:
            samples: list[SequenceOutput] = []
            if meta.do_sample:
                if meta.is_prompt:
                    # The prompt has one sequence; the sampler draws best_of tokens from it.
                    (parent_id,) = meta.seq_data
                    params = meta.sampling_params
                    stops = forced.first_token_stops(_F.request_id(meta)) if forced else 0
                    for i in range(getattr(params, "best_of", None) or params.n):
                        token = eos if uniform() < eos_prob else _not_eos(rand(vocab - 1), eos)
                        if i < stops:
                            token = eos
                        samples.append(SequenceOutput(parent_id, token, {token: _LOGPROB}))
                else:
                    for parent_id, data in meta.seq_data.items():
                        token = eos if uniform() < eos_prob else _not_eos(rand(vocab - 1), eos)
                        if forced is not None:
                            target = forced.target(_F.request_id(meta), parent_id)
                            if target is not None and data.get_output_len() + 1 >= target:
                                token = eos
                        elif lengths is not None:  # this token is output number len + 1
                            target = lengths.target(meta.request_id, parent_id)
                            if target is not None and data.get_output_len() + 1 >= target:
                                token = eos
                        samples.append(SequenceOutput(parent_id, token, {token: _LOGPROB}))
            outputs.append(CompletionSequenceGroupOutput(samples, None))
        self.steps_executed += 1
        return [SamplerOutput(outputs=outputs)]

    def add_lora(self, lora_request: Any) -> bool:
        raise NotImplementedError("the sim backend does not model LoRA adapters")

    def remove_lora(self, lora_id: int) -> bool:
        raise NotImplementedError("the sim backend does not model LoRA adapters")

    def list_loras(self) -> Set[int]:
        return set()

    def check_health(self) -> None:
        return

    # Required by later releases' bases; nothing to do without a model.
    def pin_lora(self, lora_id: int) -> bool:
        raise NotImplementedError("the sim backend does not model LoRA adapters")

    def add_prompt_adapter(self, prompt_adapter_request: Any) -> bool:
        raise NotImplementedError("the sim backend does not model prompt adapters")

    def remove_prompt_adapter(self, prompt_adapter_id: int) -> bool:
        raise NotImplementedError("the sim backend does not model prompt adapters")

    def pin_prompt_adapter(self, prompt_adapter_id: int) -> bool:
        raise NotImplementedError("the sim backend does not model prompt adapters")

    def list_prompt_adapters(self) -> Set[int]:
        return set()

    def collective_rpc(self, method: Any, timeout: float | None = None, args: tuple = (),
                       kwargs: dict | None = None) -> list:
        """0.7+: the base routes worker calls here; there are no workers (0.10.2's
        `shutdown()` calls it)."""
        return []

    def shutdown(self) -> None:
        return
