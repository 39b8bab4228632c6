"""What to run: one RunSpec holds the backend, vLLM's engine knobs, the workload, the policy and
the simulated cost model. It is what a recording's header stores, so `verify` can rebuild the
exact run from a file.

Presets are plain dicts of overrides on the defaults, and every field can be overridden again
from the command line. `RunSpec.validated()` turns bad input into a ConfigError whose message is
one line that says what is wrong and how to fix it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from engine.costmodel import CostModel
from engine.errors import ConfigError
from engine.output_lengths import OutputLengths
from engine.policy import parse_policy

# OPT-125m's max_position_embeddings; a prompt must leave room for at least one output token.
DEFAULT_SIM_MODEL = "opt-125m"
DEFAULT_GPU_MODEL = "facebook/opt-125m"


class RunSpec(msgspec.Struct, kw_only=True):
    """Everything that determines a run. Sim runs with equal specs make equal decisions."""

    backend: str = "sim"  # "sim" or "gpu"
    preset: str = "seed-5578"
    model: str | None = None  # None: opt-125m (sim: packaged config; gpu: facebook/opt-125m)
    tokenizer: str | None = None  # local HF tokenizer for the sim backend's prompt lengths

    # vLLM engine knobs (the seed's values by default)
    num_gpu_blocks: int = 8192
    num_cpu_blocks: int | None = None  # None: derived by vLLM's own arithmetic from swap_space
    swap_space_gib: float = 4.0
    block_size: int = 16
    max_num_batched_tokens: int = 4096
    max_num_seqs: int = 256
    enable_chunked_prefill: bool = True

    # workload
    requests: int = 10_000
    n: int = 8
    max_tokens: int = 1000
    prompt_len: int | None = None  # None: the seed's text slices ("```python\n" + 1000 chars)
    chars_per_token: float = 3.2  # sim backend without a tokenizer: OPT BPE on Python source
    arrival_rate: float | None = None  # requests per simulated second; None: all at t=0
    eos_prob: float = 0.0  # sim backend: chance per generated token that the "model" says EOS
    burst_size: int = 32  # requests added by one `add_burst` (the TUI's `a` key)
    seed: int = 0

    # observation
    policy: str = "off"
    max_steps: int | None = None
    toggles: list[tuple[int, str]] = []  # (step, policy): switch before that step runs

    cost: CostModel = CostModel()
    lengths: OutputLengths = OutputLengths()  # sim: which sequences end early (output_lengths.py)

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunSpec":
        """Rebuild from a header; unknown keys from newer versions are an error, not a guess."""
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as exc:
            raise ConfigError(f"run spec is not valid: {exc}") from None

    @property
    def model_name(self) -> str:
        if self.model:
            return self.model
        return DEFAULT_GPU_MODEL if self.backend == "gpu" else DEFAULT_SIM_MODEL

    def validated(self) -> "RunSpec":
        """Return self if every field makes sense, else raise ConfigError (one line)."""
        if self.backend not in ("sim", "gpu"):
            raise ConfigError(f"unknown backend {self.backend!r}: use --backend sim or gpu")
        positive = {
            "--num-gpu-blocks": self.num_gpu_blocks,
            "--block-size": self.block_size,
            "--max-num-batched-tokens": self.max_num_batched_tokens,
            "--max-num-seqs": self.max_num_seqs,
            "--requests": self.requests,
            "--max-tokens": self.max_tokens,
            "--burst-size": self.burst_size,
        }
        for flag, value in positive.items():
            if value < 1:
                raise ConfigError(f"{flag} must be a positive integer, got {value}")
        if self.num_cpu_blocks is not None and self.num_cpu_blocks < 1:
            raise ConfigError(f"--num-cpu-blocks must be a positive integer, got "
                              f"{self.num_cpu_blocks}")
        if not self.swap_space_gib > 0:
            raise ConfigError(f"--swap-space must be a positive number of GiB, got "
                              f"{self.swap_space_gib}")
        if self.n < 1:
            raise ConfigError(f"--n must be at least 1, got {self.n}")
        if self.prompt_len is not None and self.prompt_len < 1:
            raise ConfigError(f"--prompt-len must be a positive integer, got {self.prompt_len}")
        if not self.chars_per_token > 0:
            raise ConfigError(f"--chars-per-token must be positive, got {self.chars_per_token}")
        if self.arrival_rate is not None and not self.arrival_rate > 0:
            raise ConfigError(f"--arrival-rate must be a positive number of requests per "
                              f"simulated second, got {self.arrival_rate}")
        if not 0.0 <= self.eos_prob < 1.0:
            raise ConfigError(f"--eos-prob must be in [0, 1), got {self.eos_prob}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError(f"--max-steps must be a positive integer, got {self.max_steps}")
        if self.block_size not in (8, 16, 32):
            raise ConfigError(f"--block-size must be 8, 16 or 32 (what vLLM 0.5 accepts), got "
                              f"{self.block_size}")
        parse_policy(self.policy)
        for step, policy in self.toggles:
            if step < 0:
                raise ConfigError(f"--toggle-at step must be >= 0, got {step}")
            parse_policy(policy)
        self.cost.validate()
        self.lengths.validate()
        return self


PRESETS: dict[str, dict[str, Any]] = {
    # vLLM issue #5578 exactly: LLM(model="facebook/opt-125m", enable_chunked_prefill=True,
    # max_num_batched_tokens=4096, num_gpu_blocks_override=8192), default swap_space=4 GiB,
    # 10,000 prompts of "```python\n" + 1000 characters of scheduler.py, n=8, max_tokens=1000.
    "seed-5578": {},
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
    },
}


def preset_spec(name: str, **overrides: Any) -> RunSpec:
    """The preset's spec with explicit overrides (None means "not given") applied."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}: choose one of {', '.join(PRESETS)}")
    fields: dict[str, Any] = {"preset": name, **PRESETS[name]}
    fields.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return msgspec.convert(fields, RunSpec)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"bad setting: {exc}") from None
