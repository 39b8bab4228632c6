"""`observatory sweep`: one headless run per cell of a grid over RunSpec fields, on a local Ray
runtime or a Ray cluster (engine/sweep/). Ray and vLLM are imported only when cells actually run.
"""

from __future__ import annotations

import argparse
import signal
import sys

import msgspec

from engine.cli.base import CLISubcommand
from engine.cli.ray_flags import add_ray_flags
from engine.cli.run_flags import add_run_flags, spec_from_args
from engine.errors import ConfigError
from engine.exit_status import ExitStatus

DEFAULT_MAX_CELLS = 1000
EXIT_OK, EXIT_CELLS_FAILED, EXIT_INTERRUPTED = (  # engine.exit_status says why
    ExitStatus.OK, ExitStatus.DIFFERENCE, ExitStatus.INTERRUPTED)


class Sweep(CLISubcommand):
    name = "sweep"
    help = "run a grid of settings (one headless run per cell) on Ray"
    description = ("Run one headless session per cell of a grid over RunSpec fields, on a "
                   "local Ray runtime (one worker per core) or a Ray cluster (--address). "
                   "Rows go to DIR/results.jsonl and DIR/results.csv as cells finish; the "
                   "report (table and abort heatmaps) is printed at the end. Exit 0 when "
                   "every cell ran (vLLM aborting is a result), 1 when some cell failed, "
                   "130 when interrupted (finished rows are kept: --resume DIR).")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        first_run_flag = len(parser._actions)
        add_run_flags(parser)
        run_flags = {a.dest: a.default for a in parser._actions[first_run_flag:]}
        for action in parser._actions[first_run_flag:]:
            if action.dest in ("record", "no_record"):  # cells record with --record-cells
                action.help = argparse.SUPPRESS
        parser.set_defaults(run_flag_defaults=run_flags)
        g = parser.add_argument_group("sweep")
        g.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                       help="an axis over a RunSpec field (repeatable), e.g. n=2,4,8, "
                            "num_cpu_blocks=256,512 or policy=off,strict,watermark:0.5")
        g.add_argument("--seeds", type=int, metavar="N", help="repeat each cell with N seeds")
        g.add_argument("-o", "--output", metavar="DIR", help="directory for a new sweep")
        g.add_argument("--resume", metavar="DIR",
                       help="continue the sweep in DIR (its sweep.toml), skipping finished "
                            "cells")
        g.add_argument("--retry-failed", action="store_true",
                       help="with --resume: also run again the cells that failed")
        g.add_argument("--max-cells", type=int, metavar="N",
                       help=f"refuse a grid of more than N cells (default {DEFAULT_MAX_CELLS})")
        g.add_argument("--record-cells", action="store_true",
                       help="keep each cell's recording in DIR/cells/ (sweep-browse replays "
                            "them)")
        g.add_argument("--no-report", action="store_true",
                       help="do not print the report at the end")
        x = add_ray_flags(parser, "cells")
        x.add_argument("--retries", type=int, default=1, metavar="N",
                       help="run a cell again up to N times when its worker is lost "
                            "(default 1)")

    def cmd(self, args: argparse.Namespace) -> int:
        from engine.sweep.driver import Collector, plan
        from engine.sweep.grid import expand
        from engine.sweep.progress import SweepProgress
        from engine.sweep.store import SweepDir

        _check_flags(args)
        store = SweepDir(args.resume or args.output)
        spec = store.read_spec() if args.resume else new_sweep_spec(args)
        _refuse_big_grid(spec.axes, args.max_cells or spec.max_cells)
        cells = expand(spec.base, spec.axes)
        if not args.serial:
            from engine.sweep.ray_pool import require_ray

            require_ray()
        if args.address:
            from engine.sweep.ray_pool import check_reachable

            check_reachable(args.address)  # before anything is written
        if not args.resume:
            store.create(spec)
        store.lock()
        interrupted = False
        try:
            existing, _ = store.read_rows()
            todo = plan(cells, existing, retry_failed=args.retry_failed)
            progress = SweepProgress(len(todo), skipped=len(cells) - len(todo))
            collector = Collector(store, [a.key for a in spec.axes], cells, existing, progress)
            try:
                _execute(args, todo, spec.record_cells, store, collector)
            except KeyboardInterrupt:
                interrupted = True  # a second Ctrl-C must not cut the clean-up:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            finally:
                collector.write_csv()
            if not interrupted and not args.no_report:
                from engine.sweep.report import load, render

                sys.stdout.write(render(load(str(store.path)), "table",
                                        color=sys.stdout.isatty()))
                sys.stdout.flush()
            progress.close(str(store.path), interrupted=interrupted)
        finally:
            store.close()
        if interrupted:
            return EXIT_INTERRUPTED
        failed = any(collector.rows.get(c.key, {}).get("status") == "failed" for c in cells)
        return EXIT_CELLS_FAILED if failed else EXIT_OK


def _check_flags(args: argparse.Namespace) -> None:
    if args.record or args.no_record:
        raise ConfigError("a sweep records cells with --record-cells (into DIR/cells/), not "
                          "--record/--no-record")
    if bool(args.output) == bool(args.resume):
        raise ConfigError("give -o DIR for a new sweep, or --resume DIR to continue one")
    if args.retry_failed and not args.resume:
        raise ConfigError("--retry-failed goes with --resume DIR")
    if args.resume:
        given = [f"--{dest.replace('_', '-')}" for dest, default in args.run_flag_defaults.items()
                 if getattr(args, dest) != default]
        if args.grid or args.seeds is not None or args.record_cells:
            given.append("--grid/--seeds/--record-cells")
        if given:
            raise ConfigError(f"--resume runs the sweep as DIR/sweep.toml describes it; drop "
                              f"{', '.join(given)}")
    for flag, value in (("--workers", args.workers), ("--max-cells", args.max_cells)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} must be at least 1, got {value}")
    if args.retries < 0:
        raise ConfigError(f"--retries must be 0 or more, got {args.retries}")
    if args.serial and (args.address or args.workers):
        raise ConfigError("--serial runs cells in this process: drop --address/--workers")


def new_sweep_spec(args: argparse.Namespace):
    """The SweepSpec for a new sweep from the run flags and --grid/--seeds."""
    from engine.sweep.grid import build_axes
    from engine.sweep.store import SweepSpec

    base = spec_from_args(args)
    if base.backend != "sim":
        raise ConfigError("sweeps run the sim backend only (a gpu cell would need a GPU per "
                          "worker): drop --backend gpu")
    if not args.grid and args.seeds is None:
        raise ConfigError("a sweep needs at least one --grid KEY=V1,V2,... (or --seeds N)")
    axes = build_axes(args.grid, args.seeds, base)
    keys = {a.key for a in axes}
    if "swap_space_gib" in keys:
        if args.num_cpu_blocks is not None:
            raise ConfigError("--num-cpu-blocks fixes the CPU blocks, so a swap_space grid "
                              "would change nothing: drop one of them")
        base = msgspec.structs.replace(base, num_cpu_blocks=None)  # a preset's blocks too
    if "num_cpu_blocks" in keys and args.swap_space_gib is not None:
        raise ConfigError("--swap-space has no effect when num_cpu_blocks varies: drop it")
    return SweepSpec(base=base, axes=axes, record_cells=args.record_cells,
                     max_cells=args.max_cells or DEFAULT_MAX_CELLS)


def _refuse_big_grid(axes, max_cells: int) -> int:
    from engine.sweep.grid import cell_count

    count = cell_count(axes)
    if count > max_cells:
        shape = " x ".join(f"{len(a.values)} {a.key}" for a in axes)
        raise ConfigError(f"the grid has {count:,} cells ({shape}), more than --max-cells "
                          f"{max_cells:,}: shrink the grid or raise --max-cells")
    return count


def _execute(args: argparse.Namespace, todo, record: bool, store, collector) -> None:
    if not todo:
        return
    progress = collector.progress
    if args.serial:
        from engine.sweep.ray_pool import run_serially

        progress.begin()
        collector.consume(run_serially(todo, record))
        return
    import time

    from engine.sweep.ray_pool import ray_runtime, run_on_ray

    where = (f"joining the Ray cluster at {args.address}" if args.address
             else "starting a local Ray runtime")
    progress.note(f"sweep: {len(todo)} cells; {where} (its log: {store.ray_log_path})")
    started = time.monotonic()
    with ray_runtime(args.address, args.workers, store.ray_log_path, args.ray_temp_dir,
                     args.node_ip_address) as capacity:
        progress.note(f"sweep: Ray ready in {time.monotonic() - started:.1f} s; running "
                      f"{min(capacity, len(todo))} cells at a time")
        progress.begin()
        outcomes = run_on_ray(todo, record, capacity, retries=args.retries)
        try:
            collector.consume(outcomes)
        finally:
            outcomes.close()
