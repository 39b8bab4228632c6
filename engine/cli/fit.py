"""`observatory fit LOG [workload flags] -o FITTED.toml`: calibrate the sim to a real vLLM log,
V0's (5-s stats lines) or V1's (`Engine 000: ... Waiting: N reqs`, every 10 s).

The RunSpec starts from the preset / --config / flags (what a log cannot say: n, max_tokens,
prompts), takes what the log says about the engine unless a flag gives it (V0: block counts and
chunked prefill; V1: the KV cache size, `GPU KV cache size: N tokens`, as blocks, and prefix
caching from its config line), and the fit (engine.analysis.logs.fit) sets the cost model, the
output-length model and the warm-up. A V1 log is fitted with the V1 engine (vLLM 0.33, a v1-*
preset), one data-parallel engine's series at a time. It prints the per-metric error before and
after, the acceptance figures of the fitted run, and writes a TOML that `run`, `live` and
`sweep` take with --config.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from engine.cli.base import CLISubcommand
from engine.cli.reading import read_input
from engine.cli.run_flags import add_run_flags, spec_from_args
from engine.spec import preset_engine
from engine.errors import ConfigError, EngineError, RecordingError
from engine.exit_status import ExitStatus
from engine.kinds import kind_of
from engine.widths import wrapped
from engine.outpath import classify, ensure_parent, write_output


class Fit(CLISubcommand):
    name = "fit"
    help = "fit the sim's cost and output-length model to a real vLLM log (V0 or V1)"
    description = ("Run many short sims of the log's workload and fit the cost-model "
                   "coefficients, the output-length model and the warm-up so that the sim's "
                   "stats windows (V0: every 5 s; V1: every 10 s, one data-parallel engine) "
                   "match the log's; write the fitted config as TOML. A V1 log needs vLLM's "
                   "V1 engine (extra vllm033) and a v1-* preset; a V0 log a V0 vLLM and preset.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("log", metavar="LOG",
                            help="a vLLM log with stats lines, V0 or V1 (or - for stdin)")
        parser.add_argument("-o", "--output", metavar="FITTED.toml", required=True,
                            help="where to write the fitted config")
        parser.add_argument("--rounds", type=int, default=2,
                            help="search effort: about 5 x ROUNDS sims per output-length "
                                 "parameter (default 2: about 30 sims on a V0 log, 20 on a V1 "
                                 "one; 0: fit only the clock)")
        parser.add_argument("--workers", type=int, default=2,
                            help="sims run in parallel (processes; default 2)")
        parser.add_argument("--reference-engine", type=int, metavar="N", default=None,
                            help="V1 data-parallel log: fit engine N's series (`Engine 00N:`; "
                                 "-1: the `N Engines Aggregated` line); default the lowest")
        add_run_flags(parser)

    def cmd(self, args: argparse.Namespace) -> int:
        import signal

        from engine.analysis.logs.fit import STOP_MARGIN, Target, fit, window_value
        from engine.analysis.logs.fitparams import FIT_KINDS, apply_params, get_params
        from engine.analysis.logs.importer import import_log
        from engine.analysis.logs.simrun import Runner

        if args.rounds < 0 or args.workers < 1:
            raise ConfigError("--rounds must be >= 0 and --workers >= 1")
        try:  # a path that cannot be written is said now, not after the sims
            ensure_parent(classify(args.output))
        except OSError as exc:
            raise ConfigError(f"cannot write {args.output}: {exc.strerror or exc}: give "
                              f"another -o FITTED.toml") from None
        from engine.adapters.versions import require_supported

        # every sim needs vLLM: say so at once, not after 30 failed sims
        release = require_supported()
        log = import_log(read_input(args.log), args.log)
        kind = FIT_KINDS[kind_of(log.header.engine).name]
        if release.engine != kind.engine:
            raise ConfigError(f"{args.log}: a {kind.engine.upper()} log, and the installed vLLM "
                              f"{release.version} runs the {release.engine.upper()} engine; "
                              f"its fit needs {kind.needs_vllm}")
        if args.reference_engine is not None and not kind.data_parallel:
            raise ConfigError("--reference-engine picks a data-parallel engine of a V1 log; "
                              f"{args.log} is a V0 log: leave it out")
        target = Target.from_log(log, args.reference_engine)
        if target.abort_clock_s is None and not any(
                window_value(w, name, target.kind) is not None
                for w in target.windows for name in target.metrics):
            raise RecordingError(f"{args.log}: nothing to fit: no stats line with a value "
                                 f"(every one cut?); give a log with whole stats lines")
        base = _base_spec(args, log)
        last = max([w.t_s or 0.0 for w in target.windows] + [target.abort_clock_s or 0.0])
        until_s = last + target.interval_s * kind.tail_intervals
        start = get_params(base, target.warmup_guess_s, target.kind)
        engines = log.header.engine_config.get("engines") or []
        sys.stderr.write(f"fitting {len(target.windows)} windows"
                         + (f" of engine {target.windows[0].engine} (the log has "
                            f"{', '.join(map(str, engines))}; --reference-engine picks one)"
                            if len(engines) > 1 and target.windows else "")
                         + (f" and the abort at {target.abort_clock_s:.1f} s (stats clock)"
                            if target.abort_clock_s else "")
                         + f"; sims run to {until_s * STOP_MARGIN:.0f} s, {args.workers} at a "
                           f"time\n")
        runner = Runner(args.workers)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops the workers
        starts = kind.length_starts if base.lengths.early_share == 0.0 else ()
        try:
            before, best, sims = fit(target, base, start, runner, until_s, args.rounds,
                                     progress=lambda text: sys.stderr.write(text + "\n"),
                                     starts=starts)
        finally:
            runner.close()
        if before.result.error and best.result.error:
            raise EngineError(f"the sim of this workload did not start ({best.result.error}): "
                              f"fix the run flags and fit again")
        fitted = apply_params(base, best.values)
        if kind.warns_short_run and len(best.result.windows) < len(target.windows):
            sys.stderr.write(f"warning: the fitted run has {len(best.result.windows)} of the "
                             f"log's {len(target.windows)} windows: this workload cannot make "
                             f"this log; give the log's (--requests, --prompt-len, "
                             f"--max-tokens, ... or --config)\n")
        sys.stdout.write(f"{sims} sims. Error per metric (mean absolute, in the metric's units; "
                         f"abort_s on the stats clock):\n{error_table(before, best)}\n")
        sys.stdout.write(wrapped(f"before: {acceptance(before.result, fitted.requests)}", 8)
                         + "\n" + wrapped(f"after:  {acceptance(best.result, fitted.requests)}",
                                          8) + "\n")
        try:
            write_output(args.output, fitted_toml(fitted, best, before, args.log).encode())
        except OSError as exc:
            raise ConfigError(f"cannot write {args.output}: {exc.strerror or exc}: give "
                              f"another -o FITTED.toml") from None
        sys.stderr.write(f"wrote {args.output}\n")
        return ExitStatus.OK


def _base_spec(args: argparse.Namespace, log: Any):
    spec = spec_from_args(args)
    said = log.header.spec
    engine_config = log.header.engine_config
    updates: dict[str, Any] = {"backend": "sim", "policy": "off", "toggles": [],
                               "max_steps": None}
    from engine.analysis.logs.fitparams import FIT_KINDS

    kind = FIT_KINDS[kind_of(log.header.engine).name]
    preset_kind = preset_engine(spec.preset)
    if preset_kind != kind.engine:
        raise ConfigError(f"{args.log}: a {kind.engine.upper()} log with the "
                          f"{preset_kind.upper()} preset {spec.preset}: give {kind.needs_preset}")
    return BASE_SPECS[kind.engine](args, spec, said, engine_config, updates)


def _v0_base_spec(args: argparse.Namespace, spec: Any, said: dict[str, Any],
                  engine_config: dict[str, Any], updates: dict[str, Any]):
    """What a V0 log says about its engine, unless a flag says otherwise: its block counts and
    chunked prefill."""
    if "gpu_blocks" in engine_config and args.num_gpu_blocks is None:
        updates["num_gpu_blocks"] = said["num_gpu_blocks"]
    if ("cpu_blocks" in engine_config and args.num_cpu_blocks is None
            and args.swap_space_gib is None):
        updates["num_cpu_blocks"] = said["num_cpu_blocks"]
    if engine_config.get("chunked_prefill") and args.enable_chunked_prefill is None:
        updates["enable_chunked_prefill"] = True
    return msgspec.structs.replace(spec, **updates).validated()


def _v1_base_spec(args: argparse.Namespace, spec: Any, said: dict[str, Any],
                  engine_config: dict[str, Any], updates: dict[str, Any]):
    """What a V1 log says about its engine, unless a flag says otherwise: the KV cache's size
    in tokens (as whole blocks of the spec's block size) and prefix caching on or off."""
    tokens = engine_config.get("kv_cache_tokens")
    if tokens and args.num_gpu_blocks is None:
        if tokens < spec.block_size:
            raise ConfigError(f"{args.log}: a KV cache of {tokens} tokens holds no block of "
                              f"{spec.block_size}: give --num-gpu-blocks")
        # vLLM logs the pool (its null block included) as whole requests' worth of tokens,
        # truncated: round, not floor, back to blocks
        updates["num_gpu_blocks"] = round(tokens / spec.block_size)
    prefix = engine_config.get("enable_prefix_caching")
    if prefix in ("True", "False") and args.enable_prefix_caching is None:
        updates["enable_prefix_caching"] = prefix == "True"
    return msgspec.structs.replace(spec, **updates).validated()


BASE_SPECS = {"v0": _v0_base_spec, "v1": _v1_base_spec}
"""Each kind's reading of what its log says about the engine."""


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.2f}"


def error_table(before: Any, after: Any) -> str:
    rows = [("metric", "before", "after")]
    for name in dict.fromkeys([*before.errors, *after.errors]):
        rows.append((name, _fmt(before.errors[name]), _fmt(after.errors.get(name))))
    rows.append(("score", f"{before.score:.3f}", f"{after.score:.3f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:>{widths[2]}}"
                     for r in rows)


def acceptance(result: Any, requests: int | None = None) -> str:
    """The figures a fitted run is judged by, in its engine kind's words."""
    return ACCEPTANCE[kind_of(result.engine).name](result, requests)


def _v1_acceptance(result: Any, requests: int | None) -> str:
    return (f"preemptions {result.preemptions:,} (most of one request "
            f"{result.max_preemptions}); recompute tax {result.recompute_tax:.2f}; "
            f"finished requests {result.finished}"
            + (f" of {requests}" if requests else "")
            + f" in {result.sim_s:.1f} sim s; running after 10 s: median "
              f"{result.running_p50:g}, max {result.running_max}")


def _v0_acceptance(result: Any, requests: int | None) -> str:
    abort = f"{result.abort_s:.1f} s" if result.aborted else f"none in {result.sim_s:.1f} s"
    return (f"abort: {abort}; peak swapped {result.peak_swapped} (largest fall "
            f"{result.max_swapped_drop}); running after 10 s: median {result.running_p50:g}, "
            f"max {result.running_max}; finished requests {result.finished}")


ACCEPTANCE = {"v0": _v0_acceptance, "v1": _v1_acceptance}


def fitted_toml(spec: Any, best: Any, before: Any, log_name: str) -> str:
    from engine.sweep.toml_out import dumps

    keep = ("preset", "num_gpu_blocks", "num_cpu_blocks", "swap_space_gib", "block_size",
            "max_num_batched_tokens", "max_num_seqs", "enable_chunked_prefill", "requests", "n",
            "max_tokens", "prompt_len", "chars_per_token", "arrival_rate", "seed", "cost",
            "lengths")
    if spec.preset.startswith("v1-"):  # what a V1 run also reads (V1 has no swap space)
        keep = tuple(k for k in keep
                     if k not in ("num_cpu_blocks", "swap_space_gib", "lengths")) + (
            "model", "min_tokens", "prompt_len_max", "shared_prefixes", "shared_prefix_len",
            "enable_prefix_caching", "scheduler_reserve_full_isl",
            "long_prefill_token_threshold", "kv_offloading_gib", "offload_eviction",
            "offload_bandwidth_gbps")
    if spec.trace is not None:  # the workload the fit ran: the trace, pinned by its sha256
        keep += ("trace", "trace_format", "trace_start", "trace_limit", "trace_speed",
                 "trace_n", "trace_skip_bad", "trace_sha256")
    data = {k: v for k, v in spec.to_dict().items() if k in keep}
    if data.get("num_cpu_blocks") is not None:  # they override the swap space on the sim,
        data.pop("swap_space_gib", None)  # and `run --config` refuses a file with both
    header = [f"# fitted by `observatory fit` to {log_name}",
              f"# score {before.score:.3f} -> {best.score:.3f}; warm-up (stats clock at the "
              f"first step) {best.values['warmup_s']:.2f} s",
              "# per-metric mean absolute error, before -> after:"]
    header += [f"#   {k}: {_fmt(v)} -> {_fmt(best.errors.get(k))}"
               for k, v in before.errors.items()]
    return "\n".join(header) + "\n" + dumps(data)
