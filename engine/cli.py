"""The headless half of the `observatory` command line: run flags, `run`, and the recording
commands (registered by engine.analysis.commands).

tui/cli.py is the console script; it adds `live` and `replay` on top of what this module builds,
so the engine never imports the UI. Every user error ends as one line on stderr and exit 2:
argparse's own errors included (see `OneLineParser`).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import msgspec

from engine.costmodel import CostModel
from engine.errors import ConfigError
from engine.stream.records import LogLine, StepRecord
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


# ---------------------------------------------------------------------- run
class _Progress:
    """One stderr line about once a second: enough to see Swapped climb without a TUI."""

    def __init__(self, stream, verbose: bool = False) -> None:
        self.stream = stream
        self.verbose = verbose
        self.last = 0.0
        self.latest = None

    def __call__(self, item) -> None:
        if isinstance(item, StepRecord):
            self.latest = item
            now = time.monotonic()
            if now - self.last >= 1.0:
                self.last = now
                self.stream.write(
                    f"step {item.step:>6}  running {item.running:>4}  swapped {item.swapped:>4}"
                    f"  waiting {item.waiting:>5}  GPU {item.gpu_pct:5.1f}%  CPU "
                    f"{item.cpu_pct:5.1f}%  policy {item.policy}\n")
                self.stream.flush()
        elif isinstance(item, LogLine) and (self.verbose or (
                item.level in ("WARNING", "ERROR", "CRITICAL")
                and item.logger.startswith("vllm.core"))):
            times = f" (x{item.repeats})" if item.repeats > 1 else ""
            self.stream.write(f"vllm {item.level.lower()}: {item.message[:200]}{times}\n")


def cmd_run(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)  # before importing vLLM: bad flags fail in milliseconds

    from engine.stream.recorder import Recorder, default_recording_path
    from engine.session import Session
    from engine.analysis.summary import SummaryBuilder, format_summary, summary_json

    session = Session(spec)
    session.prepare()
    assert session.header is not None

    to_stdout = args.record == "-"
    recorder = None
    if not args.no_record:
        path = args.record or default_recording_path(spec)
        try:
            recorder = Recorder(path, session.header)
        except OSError as exc:
            raise ConfigError(f"cannot record to {path}: {exc.strerror or exc}; give another "
                              f"--record PATH or --no-record") from None
        session.subscribe(recorder.sink)
    builder = SummaryBuilder()
    session.subscribe(builder.add)
    session.subscribe(_Progress(sys.stderr, verbose=args.verbose))

    # Ctrl-C stops at the next step boundary, so the recording ends with a clean RunFinished.
    interrupted = threading.Event()

    def on_sigint(signum, frame):  # noqa: ANN001
        if interrupted.is_set():
            raise KeyboardInterrupt
        interrupted.set()
        session.stop()

    previous = signal.signal(signal.SIGINT, on_sigint) if _main_thread() else None
    try:
        session.run()
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if recorder is not None:
            recorder.close()

    summary = builder.result()
    out = sys.stderr if to_stdout else sys.stdout
    out.write((summary_json(summary) if args.json else format_summary(summary)) + "\n")
    if recorder is not None and recorder.error is not None:
        sys.stderr.write(f"observatory: warning: recording stopped early: {recorder.error}\n")
    elif recorder is not None and not to_stdout:
        sys.stderr.write(f"recorded {recorder.records_written} records to {recorder.path} "
                         f"({recorder.bytes_written:,} bytes)\n")
    if interrupted.is_set():
        return 130
    return EXIT_ABORTED if summary.aborted else EXIT_OK


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


# ---------------------------------------------------------------------- parser
def build_parser(prog: str = "observatory") -> tuple[argparse.ArgumentParser, Any]:
    parser = OneLineParser(
        prog=prog,
        description="Watch vLLM 0.5's chunked-prefill scheduler starve its swap space "
                    "(vLLM issue #5578), flip the fix on live, and record, replay, compare and "
                    "export every step.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    run = sub.add_parser("run", help="run headless, print progress and a summary")
    add_run_flags(run)
    run.add_argument("--json", action="store_true", help="print the summary as JSON")
    run.add_argument("-v", "--verbose", action="store_true",
                     help="print every vLLM log line (default: scheduler warnings only)")
    run.set_defaults(func=cmd_run)
    from engine.analysis import commands as recording_commands

    recording_commands.register(sub)
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
