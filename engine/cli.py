"""The headless half of the `observatory` command line: run flags, `run` and `serve`
(registered by engine.run_commands), and the recording commands (engine.analysis.commands).

tui/cli.py is the console script; it adds `live` and `replay` on top of what this module builds,
so the engine never imports the UI. Every user error ends as one line on stderr and exit 2:
argparse's own errors included (see `OneLineParser`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

import msgspec

from engine.costmodel import CostModel
from engine.errors import ConfigError
from engine.spec import PRESETS, RunSpec, preset_spec

EXIT_OK, EXIT_VERIFY_FAILED, EXIT_USAGE, EXIT_ABORTED = 0, 1, 2, 3


class OneLineParser(argparse.ArgumentParser):
    """argparse prints the whole usage block on error; we print one line that names the fix."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# ---------------------------------------------------------------------- run flags
def _toggle(text: str) -> tuple[int, str]:
    step, sep, policy = text.partition(":")
    if not sep or not step.strip().isdigit() or not policy:
        raise argparse.ArgumentTypeError(
            f"malformed --toggle-at {text!r}: use STEP:POLICY, e.g. 500:strict or 300:watermark:0.5")
    return int(step), policy


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """Flags shared by `run` and `live`. Defaults are None so presets can supply their own."""
    g = parser.add_argument_group("workload and engine")
    g.add_argument("--backend", choices=("sim", "gpu"), help="engine backend (default: sim)")
    g.add_argument("--preset", default="seed-5578",
                   help=f"workload preset: {', '.join(PRESETS)} (default: seed-5578)")
    g.add_argument("--config", metavar="FILE", help="TOML file of RunSpec fields; flags win")
    g.add_argument("--policy", help="off | strict | watermark[:F] (default: off)")
    g.add_argument("--max-steps", type=int, help="stop after this many steps")
    g.add_argument("--toggle-at", type=_toggle, action="append", metavar="STEP:POLICY",
                   help="switch policy before STEP runs (repeatable)")
    g.add_argument("--model", help="sim: packaged config name or dir with config.json; "
                                    "gpu: hub id or local path (default: opt-125m)")
    g.add_argument("--tokenizer", help="local HF tokenizer dir (sim: real prompt lengths)")
    g.add_argument("--num-gpu-blocks", type=int)
    g.add_argument("--num-cpu-blocks", type=int, help="sim only; default: from --swap-space")
    g.add_argument("--swap-space", type=float, dest="swap_space_gib", metavar="GIB")
    g.add_argument("--block-size", type=int)
    g.add_argument("--max-num-batched-tokens", type=int)
    g.add_argument("--max-num-seqs", type=int)
    g.add_argument("--no-chunked-prefill", action="store_true",
                   help="use vLLM's default scheduler (policies then have nothing to gate)")
    g.add_argument("--requests", type=int)
    g.add_argument("--n", type=int, help="samples per request")
    g.add_argument("--max-tokens", type=int)
    g.add_argument("--prompt-len", type=int, help="tokens per prompt instead of the seed's text")
    g.add_argument("--chars-per-token", type=float)
    g.add_argument("--arrival-rate", type=float, help="requests per simulated second "
                                                      "(default: all at t=0)")
    g.add_argument("--eos-prob", type=float, help="sim: chance per token of EOS (default 0)")
    g.add_argument("--burst-size", type=int, help="requests added by one burst")
    g.add_argument("--seed", type=int)
    g.add_argument("--cost", type=str, metavar="K=V,...",
                   help="sim cost model, e.g. base_s=0.004,per_decode_seq_s=2e-5")
    r = parser.add_argument_group("recording")
    r.add_argument("--record", metavar="PATH",
                   help="record to PATH ('-' = stdout); default recordings/<time>-<preset>-"
                        "<policy>.jsonl.zst")
    r.add_argument("--no-record", action="store_true", help="do not record")


_SPEC_FLAGS = ("backend", "policy", "max_steps", "model", "tokenizer", "num_gpu_blocks",
               "num_cpu_blocks", "swap_space_gib", "block_size", "max_num_batched_tokens",
               "max_num_seqs", "requests", "n", "max_tokens", "prompt_len", "chars_per_token",
               "arrival_rate", "eos_prob", "burst_size", "seed")


def load_config_file(path: str) -> dict[str, Any]:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        fields = msgspec.toml.decode(data)
    except msgspec.DecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    unknown = sorted(set(fields) - set(RunSpec.__struct_fields__))
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(unknown)}; valid ones are "
                          f"the RunSpec fields ({', '.join(RunSpec.__struct_fields__)})")
    return fields


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    """Preset, then config file, then flags. Raises ConfigError (one line) on bad input."""
    fields: dict[str, Any] = {}
    if args.config:
        fields.update(load_config_file(args.config))
    preset = fields.pop("preset", None) or args.preset
    for name in _SPEC_FLAGS:
        value = getattr(args, name, None)
        if value is not None:
            fields[name] = value
    if args.num_cpu_blocks is not None and args.swap_space_gib is not None:
        raise ConfigError("give --num-cpu-blocks or --swap-space, not both")
    if args.no_chunked_prefill:
        fields["enable_chunked_prefill"] = False
    if args.toggle_at:
        fields["toggles"] = list(args.toggle_at)
    if args.cost:
        fields["cost"] = CostModel.parse(args.cost)
    return preset_spec(preset, **fields).validated()


# ---------------------------------------------------------------------- parser
def build_parser(prog: str = "observatory") -> tuple[argparse.ArgumentParser, Any]:
    parser = OneLineParser(
        prog=prog,
        description="Watch vLLM 0.5's chunked-prefill scheduler starve its swap space "
                    "(vLLM issue #5578), flip the fix on live, and record, replay, compare and "
                    "export every step.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    from engine import run_commands  # `run` and `serve`
    from engine.analysis import commands as recording_commands

    run_commands.register(sub)
    recording_commands.register(sub)
    from engine.analysis.logs.commands import register as register_log_commands; register_log_commands(sub)
    from engine.sweep.commands import register as register_sweep_commands

    register_sweep_commands(sub)
    return parser, sub


def dispatch(args: argparse.Namespace) -> int:
    """Run a parsed command; ConfigError becomes one line on stderr and exit 2."""
    try:
        return int(args.func(args))
    except ConfigError as exc:
        sys.stderr.write(f"observatory: error: {exc}\n")
        return EXIT_USAGE
    except BrokenPipeError:  # `observatory run --record - | head` closed our stdout
        return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser, _ = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    return dispatch(args)


if __name__ == "__main__":
    sys.exit(main())
