"""A setting means the same from a flag, a `--config` file and a sweep grid, for every RunSpec
field: all three resolve to the same RunSpec (engine.spec.resolve_spec is the one rule).

The table of sample values must name every field, so a field added later without a sample
fails here instead of silently going untested.
"""

from __future__ import annotations

import typing
from pathlib import Path

import msgspec
import pytest

from engine.cli import build_parser, spec_from_args
from engine.cli.sweep import new_sweep_spec
from engine.errors import ConfigError
from engine.options import iter_flags
from engine.spec import RunSpec
from engine.sweep.grid import NOT_GRIDDABLE, expand

TRACE = str(Path(__file__).parent / "fixtures" / "traces" / "azure.csv")
# field -> (text for a flag and a grid value, the same value as TOML), all unlike the demo
# preset's own values, so a layer that is ignored shows.
SAMPLES: dict[str, tuple[str, str]] = {
    "backend": ("sim", '"sim"'),
    "preset": ("demo", '"demo"'),  # given alone (no --preset demo below it)
    "model": ("opt-125m", '"opt-125m"'),
    "tokenizer": ("/nonexistent/tokenizer", '"/nonexistent/tokenizer"'),
    "num_gpu_blocks": ("600", "600"),
    "num_cpu_blocks": ("300", "300"),
    "swap_space_gib": ("2", "2"),  # on the demo preset: must replace its 512 CPU blocks
    "block_size": ("32", "32"),
    "max_model_len": ("1024", "1024"),
    "max_num_batched_tokens": ("1024", "1024"),
    "max_num_seqs": ("32", "32"),
    "enable_chunked_prefill": ("false", "false"),
    "preemption_mode": ("recompute", '"recompute"'),
    "requests": ("10", "10"),
    "n": ("2", "2"),
    "max_tokens": ("64", "64"),
    "prompt_len": ("32", "32"),
    "chars_per_token": ("2.5", "2.5"),
    "arrival_rate": ("5.5", "5.5"),
    "eos_prob": ("0.01", "0.01"),
    "burst_size": ("4", "4"),
    "seed": ("7", "7"),
    "policy": ("watermark:0.3", '"watermark:0.3"'),
    "max_steps": ("50", "50"),
    "toggles": ("100:strict", '"100:strict"'),
    "cost": ("base_s=0.002", "{ base_s = 0.002 }"),
    "lengths": ("early_share=0.5", "{ early_share = 0.5 }"),
    # V1 knobs: a V0 spec carries them too (they resolve the same everywhere)
    "enable_prefix_caching": ("true", "true"),
    "scheduler_reserve_full_isl": ("false", "false"),
    "async_scheduling": ("true", "true"),
    "long_prefill_token_threshold": ("128", "128"),
    "kv_offloading_gib": ("0.5", "0.5"),
    "offload_eviction": ("arc", '"arc"'),
    "offload_bandwidth_gbps": ("12.5", "12.5"),
    "shared_prefixes": ("3", "3"),
    "shared_prefix_len": ("256", "256"),
    "min_tokens": ("16", "16"),
    "prompt_len_max": ("64", "64"),
    "trace": (TRACE, f'"{TRACE}"'),
    "trace_format": ("azure", '"azure"'),
    "trace_start": ("1.5", "1.5"),
    "trace_limit": ("12", "12"),
    "trace_speed": ("2.5", "2.5"),
    "trace_n": ("2", "2"),
    "trace_skip_bad": ("true", "true"),
    "trace_sha256": ("ab" * 32, f'"{"ab" * 32}"'),
}
FLAGS = dict(iter_flags(RunSpec))
HINTS = typing.get_type_hints(RunSpec, include_extras=True)
BASE = ["--preset", "demo"]


def parse(*argv: str):
    parser, _ = build_parser()
    return parser.parse_args(list(argv))


def flag_argv(field: str, text: str) -> list[str]:
    flag = FLAGS[field]
    if typing.get_args(HINTS[field])[:1] == (bool,):  # a BooleanOptionalAction: --no-flag
        return [flag if text == "true" else "--no-" + flag.lstrip("-")]
    return [flag, text]


def base(field: str) -> list[str]:
    return [] if field == "preset" else BASE


def from_flag(field: str, text: str) -> RunSpec:
    return spec_from_args(parse("run", *base(field), *flag_argv(field, text), "--no-record"))


def from_config(tmp_path: Path, field: str, toml: str) -> RunSpec:
    config = tmp_path / f"{field}.toml"
    config.write_text(f"{field} = {toml}\n")
    return spec_from_args(parse("run", *base(field), "--config", str(config), "--no-record"))


def from_grid(tmp_path: Path, field: str, text: str) -> RunSpec:
    args = parse("sweep", *base(field), "--grid", f"{field}={text}", "-o", str(tmp_path / "sweep"))
    sweep = new_sweep_spec(args)
    (cell,) = expand(sweep.base, sweep.axes)
    return cell.spec


def test_every_field_has_a_sample():
    assert set(SAMPLES) == set(RunSpec.__struct_fields__)


@pytest.mark.parametrize("field", sorted(SAMPLES))
def test_a_setting_means_the_same_from_a_flag_a_config_file_and_a_grid(tmp_path, field):
    text, toml = SAMPLES[field]
    by_flag = from_flag(field, text)
    by_config = from_config(tmp_path, field, toml)
    assert by_config == by_flag
    changed = {k for k, v in msgspec.structs.asdict(by_flag).items()
               if v != getattr(RunSpec(), k)}
    assert changed, "the sample changed nothing"
    if field in NOT_GRIDDABLE:  # the base of every cell, or a table or list: refused whole
        with pytest.raises(ConfigError, match=f"^--grid {field}: ") as refused:
            from_grid(tmp_path, field, text)
        assert "\n" not in str(refused.value)
        return
    assert from_grid(tmp_path, field, text) == by_flag


def test_swap_space_replaces_a_presets_cpu_blocks_from_every_layer(tmp_path):
    """The case the issue found: `swap-space = 2` in a config file kept the demo preset's 512
    CPU blocks while `--swap-space 2` replaced them."""
    for spec in (from_flag("swap_space_gib", "2"),
                 from_config(tmp_path, "swap_space_gib", "2"),
                 from_grid(tmp_path, "swap_space_gib", "2")):
        assert (spec.swap_space_gib, spec.num_cpu_blocks) == (2.0, None)


def test_a_higher_layer_wins_across_the_two_ways_of_sizing_swap(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("num_cpu_blocks = 300\n")
    spec = spec_from_args(parse("run", *BASE, "--config", str(config), "--swap-space", "2"))
    assert (spec.swap_space_gib, spec.num_cpu_blocks) == (2.0, None)
    config.write_text("swap-space = 2\n")
    spec = spec_from_args(parse("run", *BASE, "--config", str(config), "--num-cpu-blocks",
                                "300"))
    assert spec.num_cpu_blocks == 300
    config.write_text("swap-space = 2\nnum_cpu_blocks = 300\n")
    with pytest.raises(ConfigError, match=r"c\.toml: give num_cpu_blocks or swap_space, not"):
        spec_from_args(parse("run", *BASE, "--config", str(config)))
