"""Settings declared once (engine/options.py): every RunSpec field has one declaration that makes
its flag, its --config key and its grid spelling; every bad value, however it is given, is one
line and exit 2."""

from __future__ import annotations

import subprocess
import sys
import typing
from pathlib import Path

import msgspec
import pytest

from engine import options
from engine.costmodel import CostModel
from engine.errors import ConfigError
from engine.spec import RunSpec, preset_spec
from engine.sweep.grid import convert_value

ROOT = Path(__file__).resolve().parents[1]


def observatory(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


# ---------------------------------------------------------------------- one declaration
@pytest.mark.parametrize("cls", [RunSpec, CostModel])
def test_every_field_has_exactly_one_setting_and_its_own_flag(cls):
    hints = typing.get_type_hints(cls, include_extras=True)
    flags = []
    for name in cls.__struct_fields__:
        settings = [m for m in getattr(hints[name], "__metadata__", ())
                    if isinstance(m, options.Setting)]
        assert len(settings) == 1, f"{cls.__name__}.{name}: {len(settings)} Settings"
        assert settings[0].help
        flags.append(options.options(cls)[name].flag)
    assert len(set(flags)) == len(flags), flags
    assert list(options.options(cls)) == list(cls.__struct_fields__)


def test_every_runspec_field_is_a_flag_of_run_and_a_config_key(tmp_path):
    from engine.cli import build_parser

    parser, sub = build_parser()
    run = sub.choices["run"]
    by_dest = {a.dest: a for a in run._actions}
    for name, flag in options.iter_flags(RunSpec):
        assert name in by_dest, f"{name} has no flag"
        assert flag in by_dest[name].option_strings
    # the whole spec, as a config file of its field names, is the spec again
    spec = preset_spec("demo", toggles=[(5, "strict")], arrival_rate=2.0, max_steps=9,
                       cost=CostModel(base_s=0.01), tokenizer="some/dir")
    path = tmp_path / "all.toml"
    from engine.sweep import toml_out

    path.write_text(toml_out.dumps(spec.to_dict()))
    fields = options.load_config(RunSpec, str(path))
    assert set(fields) == {k for k, v in spec.to_dict().items() if v is not None}
    assert msgspec.convert(fields, RunSpec) == spec


def test_flags_config_files_and_grid_values_share_one_parser(tmp_path):
    samples = {"num_gpu_blocks": "300", "swap_space_gib": "1.5", "seed": "7",
               "arrival_rate": "2.5", "eos_prob": "0.1", "policy": "watermark:0.3",
               "enable_chunked_prefill": "false", "block_size": "32", "prompt_len": "none"}
    for name, text in samples.items():
        value = options.parse_setting(RunSpec, name, text)
        assert convert_value(name, text) == value
    config = tmp_path / "c.toml"
    config.write_text('swap-space = 1.5\nseed = 7\n')  # flag spellings work as keys too
    assert options.load_config(RunSpec, str(config)) == {"swap_space_gib": 1.5, "seed": 7}
    assert options.parse_setting(RunSpec, "swap-space", "2") == 2.0


def test_header_specs_are_checked_and_the_error_names_where():
    good = RunSpec().to_dict()
    assert RunSpec.from_dict(good) == RunSpec()
    for key, value, message in [("requests", "5", "x.jsonl: requests must be an integer"),
                                ("seed", -1, "x.jsonl: seed must be an integer from 0"),
                                ("cost", {"base_s": float("nan")}, "x.jsonl: cost: base_s"),
                                ("cost", {"warp": 1.0}, "x.jsonl: cost: unknown setting 'warp'"),
                                ("toggles", [[1, "fast"]], "unknown policy 'fast'"),
                                ("toggles", "nonsense", "malformed --toggle-at"),
                                ("warp", 1, "x.jsonl: unknown setting 'warp'")]:
        with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as caught:
            RunSpec.from_dict({**good, key: value}, where="x.jsonl")
        assert "\n" not in str(caught.value)


def test_validated_checks_specs_built_in_code():
    with pytest.raises(ConfigError, match="--seed must be an integer from 0 to 4,294,967,295"):
        RunSpec(seed=2**70).validated()
    with pytest.raises(ConfigError, match="--swap-space must be a number > 0 and <= 1024"):
        RunSpec(swap_space_gib=float("inf")).validated()
    with pytest.raises(ConfigError, match="cost model coefficient base_s"):
        CostModel(base_s=float("nan")).validate()
    with pytest.raises(ConfigError, match="--n 9 is more than --max-num-seqs 8"):
        RunSpec(n=9, max_num_seqs=8).validated()


def test_block_counts_beyond_the_machines_memory_are_refused():
    options.check_block_memory(8192, 7281, available=2**30)  # the seed: ~3.9 MB of objects
    with pytest.raises(ConfigError, match=r"about 23.8 GiB of host memory .* 1.0 GiB available"):
        options.check_block_memory(100_000_000, 0, available=2**30)
    available = options.available_memory_bytes()
    assert available is None or available > 0


# ---------------------------------------------------------------------- bad invocations
NAN_COST = "[cost]\nbase_s = nan\n"
BAD = [
    (["--num-gpu-blocks", "0"], "argument --num-gpu-blocks: must be an integer from 1 to"),
    (["--num-gpu-blocks", "100000000"], "argument --num-gpu-blocks: must be an integer"),
    (["--num-gpu-blocks", "abc"], "argument --num-gpu-blocks: must be an integer"),
    (["--num-gpu-blocks", "1e3"], "argument --num-gpu-blocks: must be an integer"),
    (["--num-cpu-blocks", "-5"], "argument --num-cpu-blocks: must be an integer from 1"),
    (["--swap-space", "nan"], "argument --swap-space: must be a number > 0"),
    (["--swap-space", "inf"], "finite"),
    (["--swap-space", "-1"], "argument --swap-space: must be a number > 0"),
    (["--seed", "-1"], "argument --seed: must be an integer from 0 to 4,294,967,295"),
    (["--seed", str(2**70)], "argument --seed: must be an integer from 0"),
    (["--n", "0"], "argument --n: must be an integer from 1"),
    (["--n", "300"], "--n 300 is more than --max-num-seqs 256"),
    (["--eos-prob", "1"], "argument --eos-prob: must be a number >= 0 and < 1"),
    (["--eos-prob", "nan"], "finite"),
    (["--arrival-rate", "inf"], "argument --arrival-rate"),
    (["--arrival-rate", "0"], "argument --arrival-rate: must be a number > 0"),
    (["--chars-per-token", "-inf"], "argument --chars-per-token"),
    (["--block-size", "24"], "argument --block-size: must be one of 8, 16, 32"),
    (["--backend", "tpu"], "argument --backend: must be one of sim, gpu"),
    (["--max-steps", "0"], "argument --max-steps: must be an integer from 1"),
    (["--requests", "99999999999"], "argument --requests: must be an integer"),
    (["--model", ""], "argument --model: must be non-empty text"),
    (["--policy", "watermark:nan"], "watermark level must be in (0, 1]"),
    (["--toggle-at", "5:strict", "--toggle-at", "x"], "malformed --toggle-at 'x'"),
    (["--toggle-at", f"{10**10}:strict"],
     "argument --toggle-at: step must be from 0 to 1,000,000,000"),
    (["--cost", "base_s=nan"], "argument --cost: base_s must be a number from 0 to 60"),
    (["--cost", "base_s=inf"], "finite"),
    (["--cost", "per_decode_seq_s=-1"], "per_decode_seq_s must be a number from 0 to 60"),
    (["--cost", "warp=1"], "bad --cost item 'warp=1'"),
    (["--swap-space", "1", "--num-cpu-blocks", "9"], "not both"),
    (["--preset", "nope"], "unknown preset 'nope'"),
]
CONFIGS = [
    ("[cost]\nwarp = 1.0\n", "unknown setting 'warp'"),  # as --cost warp=1 is refused
    (NAN_COST, ": cost: base_s must be a number from 0 to 60 (a finite number), got nan"),
    ("requests = \"5\"\n", ": requests must be an integer from 1 to 1,000,000, got str '5'"),
    ("seed = -1\n", ": seed must be an integer from 0"),
    ("swap_space_gib = inf\n", ": swap_space_gib must be a number > 0"),
    ("enable_chunked_prefill = 1\n", ": enable_chunked_prefill must be true or false"),
    ("toggles = [[1, \"fast\"]]\n", "unknown policy 'fast'"),
    ("cost = \"base_s=nan\"\n", "base_s must be a number from 0 to 60"),
    ("warp_factor = 9\n", "unknown setting 'warp_factor'"),
    ("preset = \n", "not valid TOML"),
]


@pytest.mark.parametrize("args, message", BAD, ids=[" ".join(a)[:40] for a, _ in BAD])
def test_bad_flag_is_one_line_and_exit_2(args, message):
    result = observatory("run", *args, "--no-record")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "error:" in lines[0] and message in lines[0], lines[0]


@pytest.mark.parametrize("text, message", CONFIGS, ids=[t.split("\n")[0] for t, _ in CONFIGS])
def test_bad_config_value_names_file_and_key(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    result = observatory("run", "--config", str(path), "--no-record")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"observatory: error: {path}") and message in lines[0], lines[0]


def test_swap_space_that_holds_no_block_is_refused_before_the_run():
    result = observatory("run", "--swap-space", "1e-9", "--no-record", "--max-steps", "1")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "observatory: error: --swap-space 1e-09 GiB holds no CPU block of 589,824 bytes for "
        "this model: give at least 0.00055 GiB, or --num-cpu-blocks")


@pytest.mark.parametrize("args, message", [
    (["--grid", "seed=1,-1"], "--grid seed=-1 must be an integer from 0 to 4,294,967,295, got -1"),
    (["--grid", "swap-space=nan"], "--grid swap_space_gib=nan must be a number > 0 and <= 1024 "
                                   "(a finite number), got nan"),
    (["--seeds", str(10**12)], "--seeds must be from 1 to 1,000,000, got 1000000000000"),
    (["--seed", "4294967295", "--seeds", "2"],
     "--seeds 2: the last seed must be an integer from 0 to 4,294,967,295, got 4294967296"),
])
def test_bad_grid_value_is_one_line(tmp_path, args, message):
    result = observatory("sweep", "--preset", "demo", *args, "--serial", "-o",
                         str(tmp_path / "s"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"observatory: error: {message}"


def test_swap_space_flag_overrides_a_presets_cpu_blocks():
    from engine.cli import build_parser, spec_from_args

    parser, _ = build_parser()
    demo = spec_from_args(parser.parse_args(["run", "--preset", "demo"]))
    assert demo.num_cpu_blocks == 512
    swapped = spec_from_args(parser.parse_args(["run", "--preset", "demo", "--swap-space", "2"]))
    assert (swapped.num_cpu_blocks, swapped.swap_space_gib) == (None, 2.0)
